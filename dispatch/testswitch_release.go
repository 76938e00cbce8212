//go:build !relaytest

package dispatch

// A release build has no test switch: every agent that has a hardening
// profile runs under it (testswitch_relaytest.go has the test build's).
//
//lint:ignore U1000 embedded in Options; the test build gives it fields
type testOptions struct{}

// unhardened names the test switch that runs the agent's sessions without
// their profile's session options, or "": never, in a release build.
func (d *Dispatcher) unhardened(string) string { return "" }

// testWritable names directories a test build binds writable into every
// agent's sandbox: none, in a release build.
func (d *Dispatcher) testWritable() []string { return nil }
