package dispatch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hai-relay/relay/dispatch/procstat"
)

// Run records.
//
// Pdeathsig kills an agent's leader when the daemon dies, but not the
// processes the leader started in its group (a launcher's native child, a
// tool's subprocess). So every agent the dispatcher starts leaves a record
// under Home/run (dir 0700, file 0600, written atomically) for as long as
// its process group may be alive: written right after the spawn, removed
// only once the group has been killed and the leader reaped. A daemon that
// dies without that teardown leaves the record behind, and the next daemon
// calls Reap, which kills what is left of the group.
//
// A pid is never trusted on its own. The record holds the leader's start
// time (/proc/<pid>/stat field 22, clock ticks since boot) and the boot id,
// so a recycled pid is never mistaken for the agent; and a random run id
// that the agent (and, through inheritance, its descendants) carries in its
// environment as HAI_RELAY_RUN, which identifies the group's members once
// the leader itself is gone. What cannot be verified is not killed.
//
// The window between the spawn and the record's rename is not covered: a
// daemon killed there leaves the leader to Pdeathsig alone (it cannot have
// started much of anything yet).

// runEnvVar carries a run's id in the agent's environment. Its name avoids
// KEY, SECRET and TOKEN, which some agents strip from their children's
// environment.
const runEnvVar = "HAI_RELAY_RUN"

// recordVersion is the run record format.
const recordVersion = 1

// errRunRecord wraps a failure to write an agent's run record, after
// which the agent is killed and the dispatch fails.
var errRunRecord = errors.New("could not write the agent's run record")

// reapWait bounds how long Reap waits for a killed group to disappear.
const reapWait = 5 * time.Second

// A leaderless group's members are looked at up to verifyTries times,
// verifyRetry apart, for the run's id.
const (
	verifyTries = 5
	verifyRetry = 50 * time.Millisecond
)

// Record kinds.
const (
	recordTask  = "task"
	recordProbe = "probe"
)

// runRecord is the file left under Home/run while an agent's process group
// may be alive.
type runRecord struct {
	Version int    `json:"v"`
	Kind    string `json:"kind"`              // "task" or "probe"
	TaskID  string `json:"task_id,omitempty"` // tasks only
	Agent   string `json:"agent"`
	Argv0   string `json:"argv0"`
	// PID is the leader's pid, which is also the group's id (Setpgid):
	// bubblewrap's, around the agent.
	PID int `json:"pid"`
	// StartTime is the leader's start time, /proc/<pid>/stat field 22.
	StartTime uint64 `json:"start_time"`
	// BootID is /proc/sys/kernel/random/boot_id when the agent started.
	BootID string `json:"boot_id"`
	// Run is the value of HAI_RELAY_RUN in the agent's environment.
	Run     string    `json:"run"`
	Started time.Time `json:"started"`
}

func (r runRecord) valid() error {
	switch {
	case r.Version != recordVersion:
		return fmt.Errorf("unknown record version %d", r.Version)
	case r.Kind != recordTask && r.Kind != recordProbe:
		return fmt.Errorf("unknown record kind %q", r.Kind)
	case r.PID <= 1:
		return fmt.Errorf("invalid pid %d", r.PID)
	case r.StartTime == 0:
		return errors.New("no start time")
	}
	return nil
}

// liveKey identifies one of this dispatcher's own agents: pid and start
// time, so that a recycled pid is a different key.
type liveKey struct {
	pid   int
	start uint64
}

// runRecordHandle is what a session needs to remove its record.
type runRecordHandle struct {
	path string
	key  liveKey
}

func (d *Dispatcher) runDir(kind string) string {
	if kind == recordProbe {
		return filepath.Join(d.o.Home, "run", "probes")
	}
	return filepath.Join(d.o.Home, "run", "agents")
}

// newRunID returns a fresh random run id.
func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validFileName reports whether name can be used as a file name in one of
// the dispatcher's directories.
func validFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\\\x00") && !strings.HasPrefix(name, ".")
}

// recordRun writes the run record of the agent s just started. It returns
// nil and no error when the dispatcher has no Home.
func (d *Dispatcher) recordRun(s *session, p *proc, run string) (*runRecordHandle, error) {
	if d.o.Home == "" {
		return nil, nil
	}
	st, err := procstat.Read(p.pid)
	if err != nil {
		return nil, fmt.Errorf("read the agent's start time: %w", err)
	}
	rec := runRecord{Version: recordVersion, Kind: recordTask, TaskID: s.taskID, Agent: s.agent, Argv0: s.argv[0],
		PID: p.pid, StartTime: st.Start, BootID: bootID(), Run: run, Started: time.Now().UTC()}
	name := s.taskID
	if s.taskID == "" {
		rec.Kind = recordProbe
		// Unique among this daemon's live agents, and never reused.
		name = strconv.Itoa(p.pid) + "-" + strconv.FormatUint(st.Start, 10)
	}
	if !validFileName(name) {
		return nil, fmt.Errorf("invalid run record name %q", name)
	}
	h := &runRecordHandle{path: filepath.Join(d.runDir(rec.Kind), name+".json"), key: liveKey{p.pid, st.Start}}
	d.mu.Lock()
	d.live[h.key] = struct{}{}
	d.mu.Unlock()
	d.recMu.Lock()
	err = writeRecord(h.path, rec)
	d.recMu.Unlock()
	if err != nil {
		d.mu.Lock()
		delete(d.live, h.key)
		d.mu.Unlock()
		return nil, err
	}
	return h, nil
}

// dropRecord removes a run's record once its group was killed and its
// leader reaped.
func (d *Dispatcher) dropRecord(h *runRecordHandle) {
	if h == nil {
		return
	}
	if err := os.Remove(h.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("remove agent run record", "path", h.path, "err", err)
	}
	d.mu.Lock()
	delete(d.live, h.key)
	d.mu.Unlock()
}

// writeRecord writes rec to path atomically (temporary file + rename), the
// directory 0700 and the file 0600.
//
// Neither the file nor the directory is fsynced, on purpose: a record only
// has to outlive the daemon *process* (the page cache does), since an OS
// crash or power loss kills every agent with it, and Reap removes records
// from an earlier boot without killing anything. An fsync would add a disk
// flush to every dispatch for nothing.
func writeRecord(path string, rec runRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return replaceFile(path, append(b, '\n'))
}

// replaceFile writes data to path, mode 0600, through a temporary file of
// its own in the same directory renamed over it: a reader sees the old
// content or the new, whole, and writers at once never rename each
// other's temporary file away.
func replaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// Reap kills the agents that a previous daemon left behind: for every run
// record under Home/run whose leader is still the same process (same boot,
// same start time), it SIGKILLs the whole process group and waits (at most
// 5 s) until no process of the group remains. When the leader is gone but
// members of its group remain (a launcher's native child, say), the group
// is killed too, provided one of them carries the run's id in its
// environment and none started before the leader; otherwise it is left
// alone with a warning, since a pid that cannot be verified is never
// killed. Records whose processes are gone, stale or unreadable ones are
// removed; a record is kept only when its group survived the wait, so that
// a later Reap tries again.
//
// The daemon calls it once at start, before recovery and the first
// Dispatch; records of this dispatcher's own running agents are skipped.
// killed counts the live processes found in the groups that were killed;
// err joins what could not be done (an unreadable directory, a group that
// did not die, ctx ending). It does nothing without a Home.
func (d *Dispatcher) Reap(ctx context.Context) (killed int, err error) {
	if d.o.Home == "" {
		return 0, nil
	}
	boot := bootID()
	var errs []error
	for _, kind := range []string{recordTask, recordProbe} {
		dir := d.runDir(kind)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read agent run records: %w", err))
			continue
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return killed, errors.Join(append(errs, err)...)
			}
			path := filepath.Join(dir, e.Name())
			if e.IsDir() {
				d.log.Warn("unexpected directory among the agent run records; left alone", "path", path)
				continue
			}
			n, err := d.reapRecord(ctx, path, boot)
			killed += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return killed, errors.Join(errs...)
}

// reapRecord handles one record file.
func (d *Dispatcher) reapRecord(ctx context.Context, path, boot string) (int, error) {
	remove := func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("remove agent run record", "path", path, "err", err)
		}
	}
	// Under recMu no record is being written, so a temporary file is one
	// a crash left unrenamed (and handled as a record, or as garbage).
	d.recMu.Lock()
	b, err := os.ReadFile(path)
	d.recMu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // removed meanwhile (a run of ours ended)
	}
	var rec runRecord
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err == nil {
		err = rec.valid()
	}
	if err != nil {
		d.log.Warn("removing an unusable agent run record; nothing killed", "path", path, "err", err)
		remove()
		return 0, nil
	}
	d.mu.Lock()
	_, ours := d.live[liveKey{rec.PID, rec.StartTime}]
	d.mu.Unlock()
	if ours {
		return 0, nil
	}
	attrs := []any{"kind", rec.Kind, "task_id", rec.TaskID, "agent", rec.Agent, "argv0", rec.Argv0,
		"pid", rec.PID, "started", rec.Started}
	if rec.BootID != boot {
		d.log.Info("agent run record from an earlier boot removed", attrs...)
		remove()
		return 0, nil
	}
	members, err := d.leftovers(ctx, rec, attrs)
	if err != nil {
		return 0, fmt.Errorf("agent run record %s: %w", path, err)
	}
	if len(members) == 0 {
		d.log.Debug("left-behind agent already gone; record removed", attrs...)
		remove()
		return 0, nil
	}
	pids := make([]int, len(members))
	for i, m := range members {
		pids[i] = m.pid
	}
	if err := syscall.Kill(-rec.PID, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return 0, fmt.Errorf("kill agent process group %d (%s): %w", rec.PID, rec.Argv0, err)
	}
	d.log.Warn("killed an agent left behind by an earlier daemon", append(attrs, "pids", pids)...)
	if err := waitGroupGone(ctx, rec.PID, reapWait); err != nil {
		return len(members), fmt.Errorf("agent process group %d (%s, task %q): %w; its record %s is kept",
			rec.PID, rec.Argv0, rec.TaskID, err, path)
	}
	remove()
	return len(members), nil
}

// leftovers returns the live processes of rec's group when the group is
// verifiably the agent's, and nil when nothing of it is left or it cannot
// be verified (logged).
func (d *Dispatcher) leftovers(ctx context.Context, rec runRecord, attrs []any) ([]procMember, error) {
	st, err := procstat.Read(rec.PID)
	switch {
	case err == nil && st.Start != rec.StartTime:
		// The pid now names another process, so the agent's group had
		// emptied (a group id is not reused while any member lives).
		d.log.Debug("left-behind agent's pid was reused; nothing killed", attrs...)
		return nil, nil
	case err == nil:
		// The leader itself (alive, or a zombie): the group is ours.
		return groupMembers(rec.PID)
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH):
		return nil, err
	}
	// The leader is gone; its group may live on in its descendants.
	// Members of the agent's group started after its leader, and one of
	// them at least still carries the run's id: a group id is reused only
	// once its group has emptied, so this tells the agent's group from a
	// later one with the same id.
	var members []procMember
	for try := 1; ; try++ {
		members, err = groupMembers(rec.PID)
		if err != nil || len(members) == 0 {
			return nil, err
		}
		older, carries := false, false
		for _, m := range members {
			if m.start < rec.StartTime {
				older = true
			}
			if !carries && rec.Run != "" && hasEnv(m.pid, runEnvVar+"="+rec.Run) {
				carries = true
			}
		}
		if carries && !older {
			return members, nil
		}
		if older || try == verifyTries {
			break
		}
		// A process in the middle of an execve shows no environment for
		// a moment: look again.
		t := time.NewTimer(verifyRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	pids := make([]int, len(members))
	for i, m := range members {
		pids[i] = m.pid
	}
	d.log.Warn("processes remain in a left-behind agent's process group but cannot be verified as its own; not killed",
		append(attrs, "pids", pids)...)
	return nil, nil
}

// waitGroupGone waits until no live process is in process group pgid.
func waitGroupGone(ctx context.Context, pgid int, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := groupMembers(pgid)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%d processes still alive %s after SIGKILL", len(left), limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// procMember is a live process of a process group.
type procMember struct {
	pid   int
	start uint64
}

// groupMembers lists the live (not zombie) processes whose process group
// is pgid, by scanning /proc.
func groupMembers(pgid int) ([]procMember, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []procMember
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil || st.PGRP != pgid || st.Dead() {
			continue // gone meanwhile, or not a member
		}
		out = append(out, procMember{pid: pid, start: st.Start})
	}
	return out, nil
}

// hasEnv reports whether pid's environment holds the entry kv ("K=V").
func hasEnv(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// bootID is the kernel's boot id, or "" when it cannot be read. It is read
// once: it cannot change while this process lives, and every dispatch
// needs it while the agent starts up.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})
