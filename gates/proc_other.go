//go:build unix && !linux

package gates

import (
	"os"
	"os/exec"
)

// watchExit reports when cmd's process exits. Outside Linux it reaps the
// process to learn that, so the group id could in principle be reused
// before killGroup runs; Linux avoids this with waitid(WNOWAIT).
func watchExit(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	var err error
	go func() {
		defer close(ch)
		err = cmd.Wait()
	}()
	return ch, func() error { <-ch; return err }
}

// unread reports 0 (unknown) outside Linux: readers stop after the grace.
func unread(*os.File) int { return 0 }
