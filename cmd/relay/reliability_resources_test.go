package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// Resource bounds.

// rssBinary returns the relay binary whose memory is measured and the
// bound its peak RSS must stay under: the product's 100 MB, on a build
// without -race. A -race build carries the race detector's shadow memory
// and bookkeeping (its idle daemon alone is about 60 MB, against 25 MB
// without, and its heap's growth shows two to three times over), which
// would hide what the daemon itself holds; so a -race test run builds one
// without (about 2 s once the build cache is warm). The daemon's races are
// the other tests' concern.
func rssBinary(t *testing.T) (bin string, boundKiB int) {
	t.Helper()
	if !raceEnabled {
		return relayBin, 100 << 10
	}
	return releaseBin(t), 100 << 10
}

// seedMessages stores n messages to codex over the socket API, from conns
// connections that each pipeline their requests (the fastest honest way
// in: every message is a real request, stored and audited by the daemon).
func seedMessages(t *testing.T, home string, n, conns int, body string) {
	t.Helper()
	senders := []string{"claude", "gemini", "cursor", "opencode", "hermes"}
	pipeline(t, home, n, conns, func(ci, i int) (string, string, string) {
		return senders[i%len(senders)], "/v1/messages",
			fmt.Sprintf(`{"to":"codex","body":"%s %d-%d","context_id":"C-seed-%d"}`, body, ci, i, i%50)
	})
}

// pipeline sends n POST requests over conns connections, each writing its
// share back to back while reading the answers, and requires every answer
// to be 200. req returns the agent, path and body of connection ci's i-th
// request.
func pipeline(t *testing.T, home string, n, conns int, req func(ci, i int) (agent, path, body string)) {
	t.Helper()
	var wg sync.WaitGroup
	for ci := 0; ci < conns; ci++ {
		per := n / conns
		if ci < n%conns {
			per++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("unix", sockPath(home))
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			go func() {
				bw := bufio.NewWriterSize(conn, 64<<10)
				for i := 0; i < per; i++ {
					agent, path, b := req(ci, i)
					fmt.Fprintf(bw, "POST %s HTTP/1.1\r\nHost: relay\r\nX-Relay-Agent: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
						path, agent, len(b), b)
				}
				_ = bw.Flush()
			}()
			br := bufio.NewReaderSize(conn, 64<<10)
			for i := 0; i < per; i++ {
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Errorf("pipelined connection %d, answer %d: %v", ci, i, err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Errorf("pipelined request: status %d %s", res.StatusCode, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// peakRSS reads VmHWM (peak RSS, KiB) of pid.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// The daemon's memory with a large backlog of unread messages: storing
// them, counting them, reading inbox pages and paging through all of them
// as an operator must not hold the backlog in memory. CI stores 3,000
// messages of 32 KiB (94 MiB of bodies, about 5 s): the daemon's peak RSS
// stays under 100 MB, and grows by at most half the backlog, which a
// daemon that held the backlog could not stay under (measured: about 25
// MB idle, 60 MB at the peak). RELAY_LONG=1 stores 100,000 short
// messages, held to the 100 MB.
func TestReliabilityBacklogRSS(t *testing.T) {
	t.Parallel()
	n, body := sized(3000, 100_000), strings.Repeat("backlog ", sized(4096, 16))
	bin, bound := rssBinary(t)
	home := newHome(t, noQuota)
	d := launchDaemonBin(t, bin, home)
	pid := d.cmd.Process.Pid
	idle, _ := procStatus(t, pid)

	t0 := time.Now()
	seedMessages(t, home, n, 8, body)
	seeded := time.Since(t0)

	c := apiClient(home)
	// The unread count covers the whole backlog.
	r := apiDo(t, c, "POST", "/v1/inbox?limit=1000", "codex", nil)
	read, _ := r.data["messages"].([]any)
	if r.status != 200 || len(read) == 0 || r.data["unread"] != float64(n-len(read)) {
		t.Fatalf("inbox over a backlog of %d: %d, %d read, unread=%v", n, r.status, len(read), r.data["unread"])
	}
	// An operator pages through all of it.
	total := countRows(t, c).msgs
	if total != n {
		t.Fatalf("%d messages listed, %d stored", total, n)
	}
	rss, threads := procStatus(t, pid)
	peak := peakRSS(t, pid)
	backlog := n * len(body) >> 10
	t.Logf("%d messages (%d KiB of bodies) stored in %v (%.0f/s); daemon RSS idle %d KiB, now %d KiB, peak %d KiB (bound %d KiB); %d threads",
		n, backlog, seeded.Round(time.Millisecond), float64(n)/seeded.Seconds(), idle, rss, peak, bound, threads)
	if peak > bound {
		t.Errorf("daemon peak RSS %d KiB with a backlog of %d messages, bound %d KiB", peak, n, bound)
	}
	if !relayLong() && peak-idle > backlog/2 {
		t.Errorf("daemon peak RSS grew by %d KiB over a backlog of %d KiB: it holds the backlog", peak-idle, backlog)
	}
	auditVerify(t, home)
}

// launchDaemonBin is launchDaemonEnv with another relay binary.
func launchDaemonBin(t *testing.T, bin, home string, env ...string) *daemonProc {
	t.Helper()
	cmd := exec.Command(bin, "daemon", "--home", home)
	cmd.Env = append(append(os.Environ(), fastExit...), env...)
	return runDaemonCmd(t, home, cmd)
}

// fdTargets lists what pid's descriptors point at.
func fdTargets(t *testing.T, pid int) []string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		out = append(out, e.Name()+"→"+l)
	}
	return out
}

// nonDBFds drops the descriptors of the database files from targets.
func nonDBFds(targets []string) []string {
	var out []string
	for _, x := range targets {
		if !strings.Contains(x, "/relay.db") {
			out = append(out, x)
		}
	}
	return out
}

// childPIDs lists the live child processes of pid.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var c int
			fmt.Sscan(f, &c)
			out = append(out, c)
		}
	}
	return out
}

// Descriptors, threads and child processes do not grow across many
// dispatches: after a warm-up at the same concurrency, the daemon holds
// no more descriptors (beyond its bounded database pool), at most a few more threads (the Go runtime keeps the
// threads it needed once), and no agent process, zombie or not. CI runs
// 160 dispatches, ten times the warm-up (about 12 s under -race on two
// cores: a descriptor or thread kept per dispatch, or per batch, shows
// as it would over more); RELAY_LONG=1 runs 1,000.
func TestReliabilityDispatchResources(t *testing.T) {
	t.Parallel()
	total := sized(160, 1000)
	const warm, batch = 16, 8
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	d := launchDaemonEnv(t, home, fastExit)
	pid := d.cmd.Process.Pid
	c := apiClient(home)
	cwd := t.TempDir()

	run := func(n int, tag string) {
		for done := 0; done < n; {
			k := min(batch, n-done)
			ids := make([]string, k)
			var wg sync.WaitGroup
			for i := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body, _ := json.Marshal(map[string]any{"target": "claude",
						"prompt": fmt.Sprintf("echo %s-%d", tag, done+i), "mission_id": "M-r", "lease_id": "S-r", "cwd": cwd})
					r, err := apiTry(c, "POST", "/v1/tasks", "codex", body)
					if err != nil || r.status != 200 {
						t.Errorf("submit: %v %d %s", err, r.status, r.body)
					}
					ids[i] = r.str("task_id")
				}()
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			for _, id := range ids {
				eventually(t, "task "+id+" completed", 60*time.Second, func() bool {
					g := apiDo(t, c, "GET", "/v1/tasks/"+id, "codex", nil)
					if s := model.State(g.str("state")); s.Terminal() {
						if s != model.StateCompleted {
							t.Fatalf("task %s: %s/%s %s", id, s, g.str("code"), g.str("message"))
						}
						return true
					}
					return false
				})
			}
			done += k
		}
	}
	settle := func() (fds, threads int) {
		// This test's own idle connections are not the daemon's leak.
		c.CloseIdleConnections()
		eventually(t, "agents gone", 10*time.Second, func() bool { return len(childPIDs(t, pid)) == 0 })
		time.Sleep(200 * time.Millisecond)
		_, threads = procStatus(t, pid)
		return fdCount(t, pid), threads
	}

	run(warm, "warm")
	fds0, threads0 := settle()
	targets0 := fdTargets(t, pid)
	other0 := len(nonDBFds(targets0))
	t0 := time.Now()
	run(total, "run")
	took := time.Since(t0)
	fds1, threads1 := settle()
	// The database's descriptors belong to its connection pools, which
	// open lazily up to a fixed size (a writer and max(4, GOMAXPROCS)
	// readers, each with the file and its WAL); every other descriptor
	// must be back to its level.
	for deadline := time.Now().Add(10 * time.Second); len(nonDBFds(fdTargets(t, pid))) > other0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	targets1 := fdTargets(t, pid)
	t.Logf("%d dispatches in %v: fds %d → %d (other than the database's: %d → %d), threads %d → %d",
		total, took.Round(time.Millisecond), fds0, fds1, other0, len(nonDBFds(targets1)), threads0, threads1)
	if other := nonDBFds(targets1); len(other) > other0 {
		t.Errorf("file descriptors grew across %d dispatches:\nbefore %v\nafter  %v", total, nonDBFds(targets0), other)
	}
	if pool := 2*(max(4, runtime.NumCPU())+1) + 1; len(targets1)-len(nonDBFds(targets1)) > pool {
		t.Errorf("%d database descriptors, more than a full pool holds (%d): %v", len(targets1)-len(nonDBFds(targets1)), pool, targets1)
	}
	if threads1 > threads0+4 {
		t.Errorf("threads grew from %d to %d across %d dispatches", threads0, threads1, total)
	}
	// Exactly one agent per task, each gone.
	auditVerify(t, home)
}
