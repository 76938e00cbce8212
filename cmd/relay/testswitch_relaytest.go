//go:build relaytest

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hai-relay/relay/dispatch"
)

// Test-only switches exist only in test builds. The tests build the relay
// with `-tags relaytest`, which compiles this file; a release build
// compiles testswitch_release.go instead, where they are not read at all:
// setting one of these variables for a release relay changes nothing.
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
//   - dispatch.SandboxWritableEnv (a PATH-style list of directories) binds
//     those directories writable into every agent's sandbox, so that the
//     scripted agent can write its event log where the test reads it.
//   - testIdleStepEnv (a Go duration) makes the idle exit wait that long
//     after each of its decisions before acting on it, so that a test can
//     aim requests at the moment a daemon decides to exit.
const (
	testShimEnv     = "RELAY_TEST_AGENT_SHIM"
	testIdleStepEnv = "RELAY_TEST_IDLE_STEP"
)

// testAutostartTaken are the test switches (above) and GORACE: a
// test daemon a facade starts takes them from the facade, so that the
// tests' autostarted daemons run as their hand-started ones do.
var testAutostartTaken = []string{testShimEnv, dispatch.UnhardenedEnv, dispatch.SandboxWritableEnv, testIdleStepEnv, "GORACE"}

// testShim returns the shim testShimEnv names, or nil.
func testShim() []string {
	if p := os.Getenv(testShimEnv); p != "" {
		return []string{p}
	}
	return nil
}

// testDispatchOptions sets the dispatcher's test options: the agents
// dispatch.UnhardenedEnv names, loudly.
func testDispatchOptions(o *dispatch.Options, log *slog.Logger) {
	var names []string
	for _, n := range strings.Split(os.Getenv(dispatch.UnhardenedEnv), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) > 0 {
		log.Warn("TEST ONLY: these agents run without their hardening profile's session options",
			"env", dispatch.UnhardenedEnv, "agents", strings.Join(names, ","))
	}
	o.Unhardened = names
	// dispatch.SandboxWritableEnv: directories bound writable into every
	// agent's sandbox, where a scripted agent leaves its event log.
	for _, p := range filepath.SplitList(os.Getenv(dispatch.SandboxWritableEnv)) {
		if filepath.IsAbs(p) {
			o.SandboxWritable = append(o.SandboxWritable, p)
		}
	}
}

// testIdleStep returns testIdleStepEnv's duration, or 0.
func testIdleStep() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(testIdleStepEnv))
	return max(d, 0)
}
