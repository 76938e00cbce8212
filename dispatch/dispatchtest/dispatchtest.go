// Package dispatchtest helps tests run the fake ACP agent
// (cmd/testfakes/fakeagent) as a real subprocess, and tells the real-agent
// tests which hardening profile covers an adapter (ProfileFor) and what a
// verification's attempts left on disk (Violations).
package dispatchtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hai-relay/relay/dispatch/hardening"
)

// FakeAgentPackage is the import path of the fake agent.
const FakeAgentPackage = "github.com/hai-relay/relay/cmd/testfakes/fakeagent"

// ShimPackage is the import path of the agent shim as a program of its
// own (the relay binary runs the same code as a hidden subcommand).
const ShimPackage = "github.com/hai-relay/relay/cmd/testfakes/agentshim"

var (
	shimOnce sync.Once
	shimBin  string
	shimErr  error
	shimOut  []byte
)

// BuildShim builds the agent shim once per test binary, beside the fake
// agent, and returns the executable's path. Cleanup removes it.
func BuildShim(tb testing.TB) string {
	tb.Helper()
	BuildFakeAgent(tb) // creates buildDir
	shimOnce.Do(func() {
		shimBin = filepath.Join(buildDir, "agentshim")
		shimOut, shimErr = goBuild(shimBin, ShimPackage)
	})
	if shimErr != nil {
		tb.Fatalf("build agent shim: %v\n%s", shimErr, shimOut)
	}
	return shimBin
}

// goBuild builds pkg to out with the go command on PATH, where `go test`
// puts the toolchain running the tests first.
func goBuild(out, pkg string) ([]byte, error) {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd.CombinedOutput()
}

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
	buildOut  []byte
)

// BuildFakeAgent builds the fake agent once per test binary into a
// temporary directory and returns the executable's path. Call Cleanup from
// TestMain to remove it.
func BuildFakeAgent(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "relay-fakeagent-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "fakeagent")
		buildOut, buildErr = goBuild(buildBin, FakeAgentPackage)
	})
	if buildErr != nil {
		tb.Fatalf("build fake agent: %v\n%s", buildErr, buildOut)
	}
	return buildBin
}

// Cleanup removes the built fake agent, if any.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

var (
	adaptersMu sync.Mutex
	adapters   = map[string]string{}
)

// FakeAdapter returns the fake agent installed as the adapter of agent's
// current generation would be by npm (InstallAdapter), once per test
// binary. So a test daemon identifies it as that adapter and runs it under
// that profile, as it would the real one. An agent without a profile gets
// the fake itself.
func FakeAdapter(tb testing.TB, agent string) string {
	tb.Helper()
	fake := BuildFakeAgent(tb)
	adaptersMu.Lock()
	defer adaptersMu.Unlock()
	if p, ok := adapters[agent]; ok {
		return p
	}
	entry, err := InstallAdapter(filepath.Join(buildDir, "adapters"), fake, agent)
	if err != nil {
		tb.Fatal(err)
	}
	adapters[agent] = entry
	return entry
}

// nativeAdapters are the profiled agents whose adapter is no npm package
// (Cursor's native binary, Hermes' Python package): the name and a
// version their profile covers, as they report them at initialize.
var nativeAdapters = map[string][2]string{
	"cursor": {"cursor-agent", "2026.10.22-27dcf5f"},
	"hermes": {"hermes-agent", "0.21.3"},
}

// InstallAdapter lays the fake agent (the program at fake) out under dir
// as npm would install the adapter of agent's current generation: a
// package.json naming the package and the version its profile was
// verified on, beside an entry script that runs the fake reporting that
// name and version at initialize. It returns the entry script, or fake
// itself for an agent without a profile. The benchmark uses it too.
func InstallAdapter(dir, fake, agent string) (string, error) {
	ps := hardening.ProfilesFor(agent)
	if len(ps) == 0 {
		return fake, nil
	}
	if n, ok := nativeAdapters[agent]; ok {
		// No npm package: a bare script the relay cannot identify before
		// it starts; it reports a name and version the profile covers at
		// initialize, where the guessed profile is confirmed.
		bin := filepath.Join(dir, agent, "bin", agent)
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return "", err
		}
		script := fmt.Sprintf("#!/bin/sh\nFAKEAGENT_NAME=%q FAKEAGENT_VERSION=%q exec %q \"$@\"\n", n[0], n[1], fake)
		return bin, os.WriteFile(bin, []byte(script), 0o755)
	}
	prof := ps[0]
	pkg, version := prof.Packages[0], prof.VerifiedOn[0]
	root := filepath.Join(dir, agent, "node_modules", filepath.FromSlash(pkg))
	entry := filepath.Join(root, "dist", "index.js")
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		return "", err
	}
	b, _ := json.Marshal(map[string]string{"name": pkg, "version": version})
	if err := os.WriteFile(filepath.Join(root, "package.json"), b, 0o644); err != nil {
		return "", err
	}
	script := fmt.Sprintf("#!/bin/sh\nFAKEAGENT_NAME=%q FAKEAGENT_VERSION=%q exec %q \"$@\"\n", pkg, version, fake)
	if err := os.WriteFile(entry, []byte(script), 0o755); err != nil {
		return "", err
	}
	return entry, nil
}
