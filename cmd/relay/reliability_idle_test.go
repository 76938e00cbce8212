package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// Submits aimed at the moment an idle autostarted daemon decides to exit:
// every task answered submitted is dispatched (reaches a terminal state
// through the fake agent) by the daemon that answered, with no new
// facade or daemon started for it. A submit that finds the daemon gone,
// or stopping, is refused (nothing done) and is not counted.
//
// RELAY_TEST_IDLE_STEP (testswitch.go) makes the daemon wait after each
// step of its idle exit, so that the submits, spread around the moment
// it decides, land before the decision, between the decision and the
// stop, while it holds requests, or after it stopped; the daemon's own
// log proves the race was met (an exit called off).
func TestIdleExitNeverStrandsASubmittedTask(t *testing.T) {
	t.Parallel()
	const (
		idle   = 100 * time.Millisecond
		step   = 150 * time.Millisecond
		rounds = 5
		burst  = 6
	)
	home := newHome(t, fullConfig(t, "allow-guarded", fmt.Sprintf("[daemon]\nidle_timeout = %q\n", idle)))
	cwd := t.TempDir()
	start := func() *daemonProc {
		cmd := exec.Command(relayBin, "daemon", "--home", home, "--autostarted")
		cmd.Env = append(append(os.Environ(), fastExit...), envIdleStep+"="+step.String())
		return runDaemonCmd(t, home, cmd)
	}
	// One connection per submit, as from separate facades; the answer or
	// the refusal is what the test counts.
	submit := func(prompt string) (id string, refused string) {
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sockPath(home))
			}}}
		r, err := apiTry(c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
			"target": "claude", "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
		switch {
		case err != nil:
			return "", err.Error()
		case r.status != 200:
			if r.code() != string(model.CodeDaemonUnavailable) {
				t.Errorf("submit: %d %s; want submitted, or daemon_unavailable from a daemon that stopped", r.status, r.body)
			}
			return "", r.code()
		}
		return r.str("task_id"), ""
	}
	db := openRO(t, home)
	stateIn := func(id string) string {
		var st string
		if err := db.QueryRow(`SELECT state FROM tasks WHERE id = ?`, id).Scan(&st); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		return st
	}

	d := start()
	answered, refused, exits := 0, 0, 0
	for round := range rounds {
		// Quiet long enough for the daemon to decide, then a burst
		// spread across its decision, its steps and its stop.
		time.Sleep(idle + time.Duration(round%4)*step/2)
		var wg sync.WaitGroup
		ids := make([]string, burst)
		for k := range burst {
			wg.Go(func() {
				time.Sleep(time.Duration(k) * step / 3)
				var why string
				if ids[k], why = submit(fmt.Sprintf("echo round %d submit %d", round, k)); why != "" {
					t.Logf("round %d submit %d refused: %s", round, k, why)
				}
			})
		}
		wg.Wait()
		// Every answered task ends, run by this daemon: none is started
		// before they have.
		for _, id := range ids {
			if id == "" {
				refused++
				continue
			}
			answered++
			deadline := time.Now().Add(20 * time.Second)
			for st := stateIn(id); !model.State(st).Terminal(); st = stateIn(id) {
				select {
				case <-d.done:
					if st = stateIn(id); !model.State(st).Terminal() { // nothing changes it now
						t.Fatalf("round %d: task %s was answered submitted, and the daemon that answered exited leaving it %s (%s)",
							round, id, st, lastLine(d.stderr.String(), "stopping"))
					}
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: task %s was answered submitted and is still %s after 20 s", round, id, st)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		select {
		case <-d.done:
			exits++
			d = start()
		default:
		}
	}
	b, _ := os.ReadFile(filepath.Join(home, "relay.log"))
	calledOff := bytes.Count(b, []byte("idle exit called off"))
	t.Logf("%d submits: %d answered and run, %d refused; %d idle exits, %d called off for a request", rounds*burst, answered, refused, exits, calledOff)
	if calledOff == 0 {
		t.Errorf("no idle exit was called off for a request: the submits missed the moment the daemon decides, and this test proved nothing")
	}
	if answered == 0 {
		t.Error("no submit was answered")
	}
}

// lastLine returns the last line of s that contains sub.
func lastLine(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return "(no line with " + sub + ")"
}
