//go:build relaytest

package main

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hai-relay/relay/dispatch"
)

// testAutostartTaken are the test switches (testswitch.go) and GORACE: a
// test daemon a facade starts takes them from the facade, so that the
// tests' autostarted daemons run as their hand-started ones do.
var testAutostartTaken = []string{testShimEnv, dispatch.UnhardenedEnv, testIdleStepEnv, "GORACE"}

// testShim returns the shim testShimEnv names, or nil.
func testShim() []string {
	if p := os.Getenv(testShimEnv); p != "" {
		return []string{p}
	}
	return nil
}

// testUnhardened returns the agents dispatch.UnhardenedEnv names, loudly.
func testUnhardened(log *slog.Logger) []string {
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
	return names
}

// testIdleStep returns testIdleStepEnv's duration, or 0.
func testIdleStep() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(testIdleStepEnv))
	return max(d, 0)
}
