package supervisor_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hai-relay/relay/dispatch/agentshim"
)

// helperEnv makes the test binary one of the children the tests start
// (helper), so that they are real processes that need no shell.
const helperEnv = "SUPERVISOR_TEST_HELPER=1"

// TestMain runs the helper when asked to, and otherwise the tests, failing
// the run if any goroutine outlives them (Run and Reap must join
// everything they start).
func TestMain(m *testing.M) {
	if os.Getenv("SUPERVISOR_TEST_HELPER") == "1" && len(os.Args) > 1 {
		syscall.Exit(helper(os.Args[1], os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

// helper is a child's whole life. It ends through syscall.Exit, so that a
// race-enabled binary does not sleep a second at exit.
func helper(mode string, args []string) int {
	switch mode {
	case "shim": // the relay's agent shim, on the rest of the arguments
		agentshim.Exit(args)
	case "exit":
		n, _ := strconv.Atoi(args[0])
		return n
	case "echo":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "sleep":
		time.Sleep(time.Hour)
	case "grandchild": // [setsid]: start a sleeping grandchild, say its pid, exit
		cmd := exec.Command(os.Args[0], "sleep")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: len(args) > 0 && args[0] == "setsid"}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("pid %d\n", cmd.Process.Pid)
	case "flood-stdout", "flood-stderr":
		n, _ := strconv.Atoi(args[0])
		w := os.Stdout
		if mode == "flood-stderr" {
			w = os.Stderr
		}
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for n > 0 {
			k, err := w.Write(chunk[:min(n, len(chunk))])
			if err != nil {
				return 1
			}
			n -= k
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	return 0
}
