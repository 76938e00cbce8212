package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
	"github.com/mark3labs/mcp-go/client"
)

// Crash cycles with the real binary: the daemon is
// stopped (kill -9, or SIGTERM) while 8 facades send messages and submit
// tasks, then restarted; after every restart the test checks, from the
// database and the fake agent's own log:
//
//   - every acknowledged message and task is stored exactly once (under
//     the ID the facade was given); one refused with daemon_unavailable is
//     not stored at all; one whose answer was lost (outcome_unknown) is
//     stored at most once;
//   - the recovery rules: a task authorized or working at the stop is now
//     failed/dispatch_interrupted; a submitted one is evaluated (leaves
//     submitted); a terminal one is unchanged;
//   - no task was dispatched twice: at most one "authorized" event per
//     task, each unique prompt reached an agent at most once, and no more
//     agents started than tasks were authorized;
//   - no agent process the stopped daemon started survived it;
//   - `relay audit verify` passes.
//
// Cycles alternate kill -9 and SIGTERM on the same home, with the same
// 8 facades (they outlive the daemon and reconnect). Every failed call,
// in either case, must be daemon_unavailable (nothing was done) or
// outcome_unknown (the daemon had the request; its answer was lost):
// nothing else.
//
// CI runs 3 cycles of each (6 in all, about 30 s under -race on two
// cores); RELAY_LONG=1 runs 20 of each.
func TestReliabilityCrashCycles(t *testing.T) {
	t.Parallel()
	crashCycles(t, sized(6, 40))
}

// ledger records what the facades were told.
type ledger struct {
	mu          sync.Mutex
	msgAcked    map[string]string // body → message_id
	msgUnknown  map[string]bool   // bodies whose send's answer was lost
	msgRefused  map[string]bool   // bodies whose send was daemon_unavailable
	taskAcked   map[string]string // prompt → task_id
	taskUnknown map[string]bool   // prompts whose submit's answer was lost
	taskRefused map[string]bool   // prompts whose submit was daemon_unavailable
	errCodes    map[string]int
	ops         int
}

func newLedger() *ledger {
	return &ledger{msgAcked: map[string]string{}, msgUnknown: map[string]bool{}, msgRefused: map[string]bool{},
		taskAcked: map[string]string{}, taskUnknown: map[string]bool{}, taskRefused: map[string]bool{}, errCodes: map[string]int{}}
}

func crashCycles(t *testing.T, cycles int) {
	dir := t.TempDir()
	agentLog := filepath.Join(dir, "agent.log")
	env := append([]string{"FAKEAGENT_LOG=" + agentLog}, fastExit...)
	home := newHome(t, fullConfig(t, "allow-guarded", "[limits]\nmax_dispatch = 32\n"))
	d := launchDaemonEnv(t, home, env)
	cwd := t.TempDir()

	agents := model.CoreAgents()
	fs := make([]crashFacade, 8)
	for i := range fs {
		fs[i] = crashFacade{c: startFacade(t, home, agents[i%6], "--no-autostart"), to: agents[(i+1)%6]}
	}

	led := newLedger()
	start := time.Now()
	for cycle := 0; cycle < cycles; cycle++ {
		sig := syscall.SIGKILL
		if cycle%2 == 1 {
			sig = syscall.SIGTERM
		}
		d = crashCycle(t, cycle, sig, d, home, env, agentLog, cwd, fs, led)
		if t.Failed() {
			t.Fatalf("cycle %d failed", cycle)
		}
	}
	led.mu.Lock()
	t.Logf("%d cycles in %v: %d calls; %d messages and %d tasks acknowledged, %d and %d refused, %d and %d with a lost answer; errors %v",
		cycles, time.Since(start).Round(time.Millisecond), led.ops, len(led.msgAcked), len(led.taskAcked),
		len(led.msgRefused), len(led.taskRefused), len(led.msgUnknown), len(led.taskUnknown), led.errCodes)
	led.mu.Unlock()
}

// crashFacade is one facade of the crash cycles and the agent it writes to.
type crashFacade struct {
	c  *client.Client
	to string
}

// crashCycle runs one cycle: load from every facade, stop the daemon with
// sig in the middle of it, restart it and check. It returns the new daemon.
func crashCycle(t *testing.T, cycle int, sig syscall.Signal, d *daemonProc, home string, env []string,
	agentLog, cwd string, fs []crashFacade, led *ledger) *daemonProc {
	stop := make(chan struct{})
	var workers sync.WaitGroup
	halt := sync.OnceFunc(func() { close(stop); workers.Wait() })
	defer halt() // also when a check below fails the test
	for fi, f := range fs {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				tag := fmt.Sprintf("c%d-f%d-%d", cycle, fi, n)
				switch {
				case n == 3: // one task per facade and cycle that runs until the stop
					submitRecorded(t, f.c, led, sig, "hang "+tag, f.to, cwd)
				case n%3 == 2:
					submitRecorded(t, f.c, led, sig, "echo "+tag, f.to, cwd)
				default:
					sendRecorded(t, f.c, led, sig, "msg "+tag, f.to)
				}
			}
		}()
	}
	// Let the load run, then stop the daemon in the middle of it.
	before := led.count()
	t0 := time.Now()
	eventually(t, "load on the daemon", 60*time.Second, func() bool { return led.count()-before >= 40 })
	t1 := time.Now()
	d.stop(t, sig)
	t2 := time.Now()
	halt()

	old, _ := agentLogEvents(t, agentLog) // the stopped daemon's agents
	snap := taskStates(t, home)
	d = launchDaemonEnv(t, home, env)
	t3 := time.Now()
	checkAfterRestart(t, home, agentLog, led, snap, old)
	t.Logf("cycle %d (%v): load %v, stop %v, restart %v, checks %v", cycle, sig, t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), time.Since(t3))
	return d
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

// failed records a failed call and reports whether it was refused
// (daemon_unavailable: nothing was done). The only other failure allowed
// is outcome_unknown.
func (l *ledger) failed(t *testing.T, sig syscall.Signal, what string, r toolResult, err error) (refused bool) {
	code := r.code()
	if err != nil {
		code = "protocol error: " + err.Error()
	}
	l.errCodes[code]++
	if code != string(model.CodeDaemonUnavailable) && code != string(model.CodeOutcomeUnknown) {
		t.Errorf("%s: %s while the daemon stopped (%v), want daemon_unavailable or outcome_unknown: %s", what, code, sig, r.text)
	}
	return code == string(model.CodeDaemonUnavailable)
}

func sendRecorded(t *testing.T, c *client.Client, l *ledger, sig syscall.Signal, body, to string) {
	r, err := tryTool(c, "send_message", map[string]any{"to": to, "body": body})
	l.mu.Lock()
	l.ops++
	ok := err == nil && !r.isError
	if ok {
		l.msgAcked[body] = r.str("message_id")
	} else if l.failed(t, sig, "send_message", r, err) {
		l.msgRefused[body] = true
	} else {
		l.msgUnknown[body] = true
	}
	l.mu.Unlock()
	if !ok {
		time.Sleep(20 * time.Millisecond) // the daemon is stopping: do not spin
	}
}

func submitRecorded(t *testing.T, c *client.Client, l *ledger, sig syscall.Signal, prompt, target, cwd string) {
	r, err := tryTool(c, "submit_task", map[string]any{"target": target, "prompt": prompt,
		"mission_id": "M-crash", "lease_id": "S-crash", "cwd": cwd})
	l.mu.Lock()
	l.ops++
	ok := err == nil && !r.isError
	if ok {
		l.taskAcked[prompt] = r.str("task_id")
	} else if l.failed(t, sig, "submit_task", r, err) {
		l.taskRefused[prompt] = true
	} else {
		l.taskUnknown[prompt] = true
	}
	l.mu.Unlock()
	if !ok {
		time.Sleep(20 * time.Millisecond)
	}
}

// taskState is a task's row as the database holds it.
type taskState struct {
	id, prompt, state, code string
}

// taskStates reads every task from the database (the daemon is stopped).
func taskStates(t *testing.T, home string) map[string]taskState {
	t.Helper()
	db := openRO(t, home)
	defer db.Close()
	rows, err := db.Query(`SELECT id, prompt, state, code FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]taskState{}
	for rows.Next() {
		var s taskState
		if err := rows.Scan(&s.id, &s.prompt, &s.state, &s.code); err != nil {
			t.Fatal(err)
		}
		out[s.id] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkAfterRestart checks a freshly restarted daemon's home against the
// ledger and the snapshot taken while it was down.
func checkAfterRestart(t *testing.T, home, agentLog string, l *ledger, snap map[string]taskState, old []int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()

	// Recovery ran before the socket answered: authorized and working
	// tasks are failed/dispatch_interrupted, terminal ones unchanged.
	now := taskStates(t, home)
	var submitted []string
	for id, s := range snap {
		n, ok := now[id]
		if !ok {
			t.Errorf("task %s vanished across the restart", id)
			continue
		}
		switch model.State(s.state) {
		case model.StateAuthorized, model.StateWorking:
			if n.state != string(model.StateFailed) || n.code != string(model.CodeDispatchInterrupted) {
				t.Errorf("task %s was %s at the stop; after restart %s/%s, want failed/dispatch_interrupted", id, s.state, n.state, n.code)
			}
		case model.StateSubmitted:
			submitted = append(submitted, id)
		default:
			if n.state != s.state || n.code != s.code {
				t.Errorf("terminal task %s changed across the restart: %s/%s → %s/%s", id, s.state, s.code, n.state, n.code)
			}
		}
	}
	// Submitted tasks resume gate evaluation.
	eventually(t, fmt.Sprintf("%d submitted tasks evaluated after restart", len(submitted)), 60*time.Second, func() bool {
		now = taskStates(t, home)
		for _, id := range submitted {
			if now[id].state == string(model.StateSubmitted) {
				return false
			}
		}
		return true
	})

	// Every acknowledged task is stored once, under its ID; a refused one
	// never; a lost answer at most once. Prompts are unique.
	byPrompt := map[string][]string{}
	for id, s := range now {
		byPrompt[s.prompt] = append(byPrompt[s.prompt], id)
	}
	for p, id := range l.taskAcked {
		if ids := byPrompt[p]; len(ids) != 1 || ids[0] != id {
			t.Errorf("acknowledged task %s (%q) stored as %v", id, p, ids)
		}
	}
	for p := range l.taskUnknown {
		if ids := byPrompt[p]; len(ids) > 1 {
			t.Errorf("task %q whose answer was lost is stored %d times: %v", p, len(ids), ids)
		}
	}
	for p := range l.taskRefused {
		if ids := byPrompt[p]; len(ids) != 0 {
			t.Errorf("task %q was refused with daemon_unavailable, yet it is stored: %v", p, ids)
		}
	}

	// Messages: the same, by body.
	db := openRO(t, home)
	defer db.Close()
	byBody := map[string][]string{}
	rows, err := db.Query(`SELECT id, body FROM messages WHERE from_agent <> 'relay'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		byBody[body] = append(byBody[body], id)
	}
	rows.Close()
	for b, id := range l.msgAcked {
		if ids := byBody[b]; len(ids) != 1 || ids[0] != id {
			t.Errorf("acknowledged message %s (%q) stored as %v", id, b, ids)
		}
	}
	for b := range l.msgUnknown {
		if ids := byBody[b]; len(ids) > 1 {
			t.Errorf("message %q whose answer was lost is stored %d times", b, len(ids))
		}
	}
	for b := range l.msgRefused {
		if ids := byBody[b]; len(ids) != 0 {
			t.Errorf("message %q was refused with daemon_unavailable, yet it is stored: %v", b, ids)
		}
	}
	for b, ids := range byBody {
		if len(ids) > 1 {
			t.Errorf("message %q stored %d times", b, len(ids))
		}
	}

	// At most once: one authorized event per task, one prompt per task
	// text, no more agent starts than authorizations.
	authorized := authorizedCounts(t, db)
	dispatched := 0
	for id, n := range authorized {
		dispatched++
		if n > 1 {
			t.Errorf("task %s was authorized %d times", id, n)
		}
	}
	starts, prompts := agentLogEvents(t, agentLog)
	for p, n := range prompts {
		if n > 1 {
			t.Errorf("prompt %q reached an agent %d times", p, n)
		}
	}
	if len(starts) > dispatched {
		t.Errorf("%d agent processes started for %d authorized tasks", len(starts), dispatched)
	}

	// No agent of the stopped daemon survived it.
	eventually(t, "agents of the stopped daemon gone", 10*time.Second, func() bool {
		for _, pid := range old {
			if alive(pid) {
				return false
			}
		}
		return true
	})

	auditVerify(t, home)
}

// authorizedCounts counts each task's transitions into authorized.
func authorizedCounts(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT task_id, count(*) FROM task_events WHERE to_state = 'authorized' GROUP BY task_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// agentLogEvents reads the fake agent's log: the pids of its starts and
// how often each prompt text arrived.
func agentLogEvents(t *testing.T, path string) (starts []int, prompts map[string]int) {
	t.Helper()
	prompts = map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, prompts
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Event string `json:"event"`
			PID   int    `json:"pid"`
			Start uint64 `json:"start"`
			NS    string `json:"pidns"`
			Text  string `json:"text"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a line cut by a kill
		}
		switch ev.Event {
		case "start":
			// The host's pid of the agent, in its sandbox's pid namespace
			// (0 once it is gone).
			starts = append(starts, dispatchtest.HostPIDOf(ev.PID, ev.Start, ev.NS))
		case "prompt":
			if strings.HasPrefix(ev.Text, "echo ") || strings.HasPrefix(ev.Text, "hang ") {
				prompts[ev.Text]++
			}
		}
	}
	return starts, prompts
}
