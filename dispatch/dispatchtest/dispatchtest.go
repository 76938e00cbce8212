// Package dispatchtest helps tests run the fake ACP agent
// (dispatch/fakeagent) as a real subprocess.
package dispatchtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// FakeAgentPackage is the import path of the fake agent.
const FakeAgentPackage = "github.com/hai-relay/relay/dispatch/fakeagent"

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
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goBin, "build", "-o", buildBin, FakeAgentPackage)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
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
