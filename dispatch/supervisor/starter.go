package supervisor

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrStopped is returned by a Starter's Start after Stop.
var ErrStopped = errors.New("process starter stopped")

// Starter starts processes from one goroutine that is locked to its OS
// thread for its whole life.
//
// Why: children get a parent-death signal so that none outlives the
// daemon. Linux sends it when the *thread* that forked the child exits,
// not the process (prctl(2); golang/go#27505). The Go runtime may run
// exec.Cmd.Start on any thread, and a thread can end while the process
// lives on (a goroutine that exits while locked to its thread takes the
// thread with it), which would kill a healthy child mid-task. Starting
// every process from this one locked goroutine pins them all to a thread
// that lives exactly as long as the Starter: the goroutine exits, still
// locked so that the thread dies with it, at Stop, which therefore sends
// the parent-death signal to every process it started that still runs.
// The main thread never ends, so the goroutine hands over to another if
// it finds itself there.
type Starter struct {
	reqs chan startReq
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

// NewStarter starts a Starter's goroutine and thread.
func NewStarter() *Starter {
	s := &Starter{reqs: make(chan startReq), quit: make(chan struct{}), done: make(chan struct{})}
	go s.loop(nil)
	return s
}

// loop serves start requests on its locked thread until Stop. It closes
// handover, when given, once it holds its thread.
func (s *Starter) loop(handover chan struct{}) {
	runtime.LockOSThread() // never unlocked, but on the main thread: see the type comment
	if handover != nil {
		close(handover)
	}
	if unix.Gettid() == unix.Getpid() {
		// The main thread never ends (the runtime parks it for good when
		// a goroutine locked to it exits), so Stop would signal no child.
		// Hand over to a goroutine that cannot run here: this one keeps
		// the main thread locked until the other holds its own thread.
		next := make(chan struct{})
		go s.loop(next)
		<-next
		runtime.UnlockOSThread()
		return
	}
	defer close(s.done)
	for {
		select {
		case r := <-s.reqs:
			r.done <- r.cmd.Start()
		case <-s.quit:
			return
		}
	}
}

// Start runs cmd.Start on the Starter's thread (Spec.Start). After Stop it
// returns ErrStopped.
func (s *Starter) Start(cmd *exec.Cmd) error {
	r := startReq{cmd: cmd, done: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.done:
		return ErrStopped
	}
	return <-r.done
}

// Stop ends the Starter's goroutine and thread, which sends the
// parent-death signal to every process it started that still runs: call
// it last, when every such process has been reaped. It is idempotent.
func (s *Starter) Stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}
