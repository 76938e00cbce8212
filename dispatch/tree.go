package dispatch

// Which task a process is in.
//
// A facade (`relay mcp`) that a task's agent starts, directly or through
// its shell, node or MCP client, acts inside that task: the daemon tells
// so from the process tree, so no client can claim it. Every agent runs
// as the child of its own leader (the agent shim, or the agent itself
// without one), and the shim is a child subreaper: a descendant whose
// parent exits is reparented to the shim, never to init. So a process is
// in a task's tree exactly when its chain of parents reaches that task's
// leader.

// maxTreeWalk bounds the parents TaskOfProcess looks at: far more than any
// agent's nesting (agent → node → MCP client → relay mcp is four).
const maxTreeWalk = 64

// TaskOfProcess returns the id of the running task whose agent's process
// tree holds the process pid — the task's leader (its agent shim, or its
// agent), or any descendant of it — or "" when pid is in no running
// task's tree, or is no process.
//
// A pid is never trusted on its own. A task is matched only through its
// leader as the dispatcher started it (pid and start time, /proc/<pid>/stat
// field 22), so a recycled pid of a leader that is gone matches nothing;
// and each step up from a process to its parent checks that the parent
// started no later than the process: a parent that did was not its
// parent but a new process that took the pid between the two reads (the
// walk then stops: no task). Without /proc nothing is matched.
func (d *Dispatcher) TaskOfProcess(pid int) string {
	roots := d.taskLeaders()
	if len(roots) == 0 || pid <= 0 {
		return ""
	}
	st, err := readProcStat(pid)
	for range maxTreeWalk {
		if err != nil || st.dead() {
			return ""
		}
		if id, ok := roots[liveKey{pid, st.start}]; ok {
			return id
		}
		if st.ppid <= 1 {
			return "" // init, or the kernel's own: no task above
		}
		parent, perr := readProcStat(st.ppid)
		if perr == nil && parent.start > st.start {
			return ""
		}
		pid, st, err = st.ppid, parent, perr
	}
	return ""
}

// taskLeaders returns the leader of every running task's agent (pid and
// start time) with the task's id.
func (d *Dispatcher) taskLeaders() map[liveKey]string {
	d.mu.Lock()
	sessions := make(map[string]*session, len(d.runs))
	for id, s := range d.runs {
		sessions[id] = s
	}
	d.mu.Unlock()
	roots := make(map[liveKey]string, len(sessions))
	for id, s := range sessions {
		s.mu.Lock()
		p := s.p
		s.mu.Unlock()
		if p != nil && p.start != 0 {
			roots[liveKey{p.pid, p.start}] = id
		}
	}
	return roots
}
