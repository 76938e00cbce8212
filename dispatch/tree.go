package dispatch

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Which task a process is in.
//
// A facade (`relay mcp`) that a task's agent starts, directly or through
// its shell, node or MCP client, acts inside that task, and only as its
// target: the daemon tells so from the kernel, so no client can claim or
// shed it. Every agent runs in its own sandbox (package sandbox), whose
// pid namespace the agent and all its descendants are in, and which none
// of them can leave: a zombie leader, a double fork, setsid or any depth
// of nesting change nothing, and a namespace made inside the sandbox is
// a child of the sandbox's (the walk goes up through it). So a process is
// inside task T exactly when its pid namespace is T's sandbox's, or lies
// below it.

// ErrUnplaced is returned when a process cannot be placed while tasks
// run: it may be inside one, so nothing it asks may be taken as top-level.
var ErrUnplaced = errors.New("the process cannot be placed")

// maxNSWalk bounds the pid namespaces PlaceProcess walks up (the kernel
// nests at most 32).
const maxNSWalk = 40

// PlaceProcess returns the running task inside whose sandbox process pid
// runs, with that task's target agent, or "" and "" when pid runs in none
// (top-level). While any task runs, a process it cannot place (gone, its
// namespace unreadable, in a pid namespace that is neither the daemon's
// nor below a task's) is ErrUnplaced: fail closed. With no task running,
// every process is top-level.
func (d *Dispatcher) PlaceProcess(pid int) (taskID, target string, err error) {
	sessions := d.runningSessions()
	if len(sessions) == 0 {
		return "", "", nil
	}
	if pid <= 0 {
		return "", "", fmt.Errorf("%w: no process", ErrUnplaced)
	}
	self, err := nsInode("/proc/self/ns/pid")
	if err != nil {
		return "", "", fmt.Errorf("%w: the daemon's own pid namespace: %w", ErrUnplaced, err)
	}
	byNS := make(map[uint64]*session, len(sessions))
	for _, s := range sessions {
		if ns := s.sandboxNS(); ns != 0 {
			byNS[ns] = s
		}
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrUnplaced, err)
	}
	for depth := range maxNSWalk {
		var st unix.Stat_t
		err := unix.Fstat(fd, &st)
		if err != nil {
			_ = unix.Close(fd)
			return "", "", fmt.Errorf("%w: %w", ErrUnplaced, err)
		}
		if st.Ino == self {
			_ = unix.Close(fd)
			if depth > 0 {
				// Below the daemon's, in no task's: another sandbox or a
				// container, or a task's whose namespace is not known yet.
				return "", "", fmt.Errorf("%w: in a pid namespace of no running task's", ErrUnplaced)
			}
			return "", "", nil
		}
		if s, ok := byNS[st.Ino]; ok {
			_ = unix.Close(fd)
			return s.taskID, s.agent, nil
		}
		parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		_ = unix.Close(fd)
		if err != nil {
			return "", "", fmt.Errorf("%w: a pid namespace of no task's, above which the daemon's cannot be reached: %w", ErrUnplaced, err)
		}
		fd = parent
	}
	_ = unix.Close(fd)
	return "", "", fmt.Errorf("%w: pid namespaces nested deeper than %d", ErrUnplaced, maxNSWalk)
}

// TaskOfProcess returns the id of the running task inside whose sandbox
// process pid runs, or "" (top-level, or not placed).
func (d *Dispatcher) TaskOfProcess(pid int) string {
	id, _, _ := d.PlaceProcess(pid)
	return id
}

// runningSessions returns the task runs whose agent has started.
func (d *Dispatcher) runningSessions() []*session {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*session, 0, len(d.runs))
	for _, s := range d.runs {
		out = append(out, s)
	}
	return out
}

// sandboxNS returns the inode of the run's sandbox's pid namespace, found
// once from bubblewrap's first child and kept: 0 before it is known.
func (s *session) sandboxNS() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidNS != 0 || s.p == nil {
		return s.pidNS
	}
	bwrap := s.p.pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", bwrap, bwrap))
	if err != nil {
		return 0
	}
	for _, c := range strings.Fields(string(b)) {
		if ns, err := nsInode("/proc/" + c + "/ns/pid"); err == nil {
			if self, err := nsInode("/proc/self/ns/pid"); err == nil && ns != self {
				s.pidNS = ns
				break
			}
		}
	}
	return s.pidNS
}

// nsInode returns the inode of the namespace file path.
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
