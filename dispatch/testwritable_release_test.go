//go:build !relaytest

package dispatch_test

import "github.com/hai-relay/relay/dispatch"

// sandboxWritable is a no-op in a release build, which has no test
// switch: the tests run with -tags relaytest (scripts/test).
func sandboxWritable(*dispatch.Options, ...string) {}
