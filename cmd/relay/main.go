// Command relay is HAI-Relay: a local relay that lets coding agents leave
// each other messages and delegate tasks, every step gated, persisted and
// audited. See README.md and `relay help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/hai-relay/relay/dispatch/agentshim"
	"github.com/hai-relay/relay/dispatch/sandbox"
)

func main() {
	// The agent shim the daemon starts every agent through: before any
	// signal handling or profiling of the relay's own.
	if len(os.Args) > 1 && os.Args[1] == agentshim.Command {
		agentshim.Exit(os.Args[2:])
	}
	// The step inside an agent's sandbox that applies Landlock and
	// executes the agent.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ExecCommand {
		sandbox.Exit(os.Args[2:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startProfile(os.Getenv("RELAY_CPUPROFILE"), os.Args[1:])
	code := run(ctx, os.Args[1:], &cliIO{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stopProfile()
	stop()
	os.Exit(code)
}

// startProfile writes a CPU profile of this process to
// DIR/relay-COMMAND-PID.pprof when RELAY_CPUPROFILE=DIR is set, for
// profiling the daemon and the facades under relay-bench (see
// BENCHMARKS.md). The profile is complete when the command returns
// normally (a facade at the end of its stdin, a daemon on SIGTERM).
func startProfile(dir string, args []string) func() {
	if dir == "" {
		return func() {}
	}
	name := "relay"
	if len(args) > 0 {
		name = args[0]
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("relay-%s-%d.pprof", filepath.Base(name), os.Getpid())))
	if err != nil {
		fmt.Fprintf(os.Stderr, "relay: RELAY_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "relay: RELAY_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
