// Package dispatchtest helps tests run the fake ACP agent
// (cmd/testfakes/fakeagent) as a real subprocess.
package dispatchtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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
