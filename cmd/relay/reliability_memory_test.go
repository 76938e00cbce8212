package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// floodBoundKiB is the bound the daemon's RSS must stay under while every
// dispatch slot runs an agent streaming 10 MB updates.
const floodBoundKiB = 256 << 10

// floodedBytes sums what the fake agents logged they wrote ("flooded").
func floodedBytes(t *testing.T, logPaths ...string) (lines, bytes int64, runs int) {
	t.Helper()
	for _, logPath := range logPaths {
		f, err := os.Open(logPath)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Event string
				Lines int64
				Bytes int64
			}
			// A task log holds the agent's events after a prefix
			// (FAKEAGENT_LOG=stderr).
			line, _ := strings.CutPrefix(sc.Text(), "fakeagent-event ")
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "flooded" {
				lines, bytes, runs = lines+ev.Lines, bytes+ev.Bytes, runs+1
			}
		}
		f.Close()
	}
	return lines, bytes, runs
}

// One hostile agent cannot push the daemon's memory up: with every
// dispatch slot busy (max_dispatch = 4, four callers), four agents stream
// session/update lines of about 10 MB each — message chunks and tool
// calls with 10 MB titles and content — as fast as the daemon reads them,
// for 10 s (60 s with RELAY_LONG=1). The daemon's RSS, read from /proc
// every 50 ms, stays under 256 MiB throughout (the test kills it and
// fails at the first reading over); each task then completes with its
// reply cut at the result bound, and its task log says lines were cut.
// The daemon is built without -race (see rssBinary). A daemon that held
// what the SDK queued (256 notifications of up to 10 MiB per run) grew
// past the bound within seconds.
func TestReliabilityFloodingAgentsKeepTheDaemonSmall(t *testing.T) {
	t.Parallel()
	secs := sized(10, 60)
	bin, _ := rssBinary(t)
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	// The agents' events go to their task logs: the daemon is a release
	// build (no test switch binds a file of the test's into a sandbox).
	d := launchDaemonBin(t, bin, home, "FAKEAGENT_LOG=stderr")
	pid := d.cmd.Process.Pid
	idle, _ := procStatus(t, pid)
	c := apiClient(home)
	cwd := t.TempDir()

	const size = 10<<20 - 4<<10 // under the 10 MiB a line may have
	var ids []string
	for _, caller := range []string{"codex", "gemini", "cursor", "opencode"} {
		ids = append(ids, submitFor(t, c, caller, "claude", fmt.Sprintf("flood %d %d", size, secs), cwd))
	}
	for _, id := range ids {
		eventually(t, "task "+id+" working", 60*time.Second, func() bool { return operatorState(t, c, id) == "working" })
	}

	// Watch the RSS until every task has ended.
	var peak, samples int
	deadline := time.Now().Add(time.Duration(secs)*time.Second + 2*time.Minute)
	for ended := 0; ended < len(ids); {
		rss, _ := procStatus(t, pid)
		samples++
		peak = max(peak, rss)
		if rss > floodBoundKiB {
			_ = d.cmd.Process.Kill()
			t.Fatalf("daemon RSS %d KiB after %d samples, bound %d KiB (idle %d KiB)", rss, samples, floodBoundKiB, idle)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flooding tasks did not end within %v", time.Until(deadline)+time.Duration(secs)*time.Second+2*time.Minute)
		}
		ended = 0
		for _, id := range ids {
			if model.State(operatorState(t, c, id)).Terminal() {
				ended++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	hwm := peakRSS(t, pid)
	var taskLogs []string
	for _, id := range ids {
		taskLogs = append(taskLogs, filepath.Join(home, "logs", "tasks", id+".log"))
	}
	lines, bytes, runs := floodedBytes(t, taskLogs...)
	t.Logf("%d agents wrote %d lines (%d MiB) in %d s, %.0f MiB/s; daemon RSS idle %d KiB, peak %d KiB sampled, VmHWM %d KiB (bound %d KiB)",
		runs, lines, bytes>>20, secs, float64(bytes>>20)/float64(secs), idle, peak, hwm, floodBoundKiB)
	if hwm > floodBoundKiB {
		t.Errorf("daemon peak RSS (VmHWM) %d KiB, bound %d KiB", hwm, floodBoundKiB)
	}
	// The flood was real: gigabytes read, not a stalled pipe.
	if runs != len(ids) || bytes < int64(secs)*40<<20 {
		t.Errorf("%d agents logged a flood of %d MiB in %d s in all, want %d agents and at least 40 MiB/s", runs, bytes>>20, secs, len(ids))
	}
	for _, id := range ids {
		r := taskEnded(t, c, id)
		if r.str("state") != "completed" || len(r.str("result")) != 256<<10 || !strings.Contains(r.str("message"), "truncated") {
			t.Errorf("task %s: %s/%s, a %d-byte result (%s); want completed with the reply cut at 256 KiB",
				id, r.str("state"), r.code(), len(r.str("result")), clipText(r.str("message"), 200))
		}
		b, err := os.ReadFile(filepath.Join(home, "logs", "tasks", id+".log"))
		if err != nil || !strings.Contains(string(b), `cut a "session/update" line of`) {
			t.Errorf("task log of %s (%v) does not say lines were cut:\n%s", id, err, clipText(string(b), 2000))
		}
	}
	auditVerify(t, home)
}
