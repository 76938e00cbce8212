//go:build relaytest

package dispatch

import "slices"

// UnhardenedEnv is the environment variable a test build of the daemon
// reads testOptions.Unhardened from (comma-separated agent names). Only a
// relay built with -tags relaytest, as the tests build it, has it.
const UnhardenedEnv = "RELAY_TEST_UNHARDENED"

// testOptions are the dispatcher's test-only options, in a test build
// only (-tags relaytest); a release build's testOptions is empty.
type testOptions struct {
	// Unhardened names agents whose sessions run without their hardening
	// profile's session options (no _meta, no mode or option set or
	// checked, no rule environment, arguments or files), still under the
	// deny-all client: how CI proves that a verification detects what the
	// profile prevents (UnhardenedEnv).
	Unhardened []string
	// SandboxWritable are directories or files bound writable into every
	// agent's sandbox (at their own paths), so that a scripted agent can
	// leave its event log where the test reads it (SandboxWritableEnv).
	SandboxWritable []string
}

// SandboxWritableEnv is the environment variable a test build of the
// daemon reads testOptions.SandboxWritable from (a PATH-style list).
const SandboxWritableEnv = "RELAY_TEST_SANDBOX_WRITABLE"

// testWritable names the directories a test binds writable into every
// agent's sandbox.
func (d *Dispatcher) testWritable() []string { return d.o.SandboxWritable }

// unhardened names the test switch that runs the agent's sessions without
// their profile's session options, when it does, or "".
func (d *Dispatcher) unhardened(agent string) string {
	if slices.Contains(d.o.Unhardened, agent) {
		return UnhardenedEnv
	}
	return ""
}
