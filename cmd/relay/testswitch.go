package main

// Test-only switches exist only in test builds. The tests build the relay
// with `-tags relaytest`, which compiles testswitch_relaytest.go; a
// release build compiles testswitch_release.go instead, where they are
// not read at all: setting one of these variables for a release relay
// changes nothing.
//
//   - testShimEnv names a shim executable (cmd/testfakes/agentshim) the
//     daemon runs agents and the authority adapter under instead of its
//     own `__agent-shim`: the tests build the relay with the race
//     detector, whose start-up costs a tenth of a CPU second per process,
//     and point this at a shim built without it.
//   - dispatch.UnhardenedEnv (comma-separated agent names) runs those
//     agents without their hardening profile's session options, still
//     under the deny-all client, so that CI proves `relay agents verify`
//     detects what a profile prevents.
//   - testIdleStepEnv (a Go duration) makes the idle exit wait that long
//     after each of its decisions before acting on it, so that a test can
//     aim requests at the moment a daemon decides to exit.
const (
	testShimEnv     = "RELAY_TEST_AGENT_SHIM"
	testIdleStepEnv = "RELAY_TEST_IDLE_STEP"
)
