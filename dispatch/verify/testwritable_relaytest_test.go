//go:build relaytest

package verify_test

import "github.com/hai-relay/relay/dispatch"

// sandboxWritable binds paths writable into every agent's sandbox,
// through the test build's option.
func sandboxWritable(o *dispatch.Options, paths ...string) { o.SandboxWritable = paths }
