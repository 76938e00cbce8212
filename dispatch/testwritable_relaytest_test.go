//go:build relaytest

package dispatch_test

import "github.com/hai-relay/relay/dispatch"

// sandboxWritable binds paths writable into every agent's sandbox (the
// scripted agent's event log and pid file), through the test build's
// option.
func sandboxWritable(o *dispatch.Options, paths ...string) { o.SandboxWritable = paths }
