package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Benchmarks of the facade, each reported against a floor measured in the
// same run (these machines are noisy; ratios mean more than times):
//
//	go test -run '^$' -bench . -benchtime 30x ./cmd/relay-bench
//
// The relay is the real binary, built once by TestMain (with the race
// detector when the tests run with it).

// relayBin is the relay binary the tests and benchmarks drive.
var relayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relay-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	relayBin = filepath.Join(dir, "relay")
	args := []string{"build", "-o", relayBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "github.com/hai-relay/relay/cmd/relay")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build relay: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var floorOnce struct {
	sync.Once
	path string
	err  error
}

// floorBin builds cmd/testfakes/mcpfloor, a minimal mcp-go stdio server.
func floorBin(b *testing.B) string {
	b.Helper()
	floorOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpfloor-")
		if err != nil {
			floorOnce.err = err
			return
		}
		floorOnce.path = filepath.Join(dir, "mcpfloor")
		out, err := exec.Command("go", "build", "-o", floorOnce.path, "github.com/hai-relay/relay/cmd/testfakes/mcpfloor").CombinedOutput()
		if err != nil {
			floorOnce.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if floorOnce.err != nil {
		b.Fatal(floorOnce.err)
	}
	return floorOnce.path
}

const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}` + "\n"

// coldStart execs argv, writes initialize and returns the time until the
// answer's line arrives.
func coldStart(b *testing.B, argv []string) time.Duration {
	cmd := exec.Command(argv[0], argv[1:]...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(in, initializeLine); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	d := time.Since(start)
	if err != nil || len(line) == 0 {
		b.Fatalf("%v: no initialize answer: %v", argv, err)
	}
	in.Close()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return d
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1))]
}

// BenchmarkFacadeColdStart: exec → initialize answered, relay facade (with a
// daemon running, so it also connects and audits the connection) vs the
// mcp-go floor, alternating per iteration.
func BenchmarkFacadeColdStart(b *testing.B) {
	floor := floorBin(b)
	home := benchHome(b)
	var relay, base []time.Duration
	for i := 0; i < b.N; i++ {
		base = append(base, coldStart(b, []string{floor}))
		relay = append(relay, coldStart(b, []string{relayBin, "mcp", "--as", "claude", "--home", home, "--no-autostart"}))
	}
	b.ReportMetric(float64(median(relay).Microseconds()), "relay-µs")
	b.ReportMetric(float64(median(base).Microseconds()), "floor-µs")
	b.ReportMetric(float64(median(relay))/float64(median(base)), "ratio")
}

// benchHome starts a daemon on a fresh home for a benchmark.
func benchHome(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "relay-bench-")
	if err != nil {
		b.Fatal(err)
	}
	home := filepath.Join(dir, "h")
	cmd := exec.Command(relayBin, "daemon", "--home", home)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	})
	for i := 0; i < 600; i++ {
		if _, err := os.Stat(filepath.Join(home, "relay.sock")); err == nil {
			return home
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("daemon did not start")
	return ""
}

func benchClient(b *testing.B, argv []string) *client.Client {
	b.Helper()
	c, err := client.NewStdioMCPClient(argv[0], os.Environ(), argv[1:]...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = "2025-06-18"
	ir.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "0"}
	if _, err := c.Initialize(context.Background(), ir); err != nil {
		b.Fatal(err)
	}
	return c
}

func send(b *testing.B, c *client.Client, to string, i int) time.Duration {
	var req mcp.CallToolRequest
	req.Params.Name = "send_message"
	req.Params.Arguments = map[string]any{"to": to, "body": fmt.Sprint("bench message ", i)}
	start := time.Now()
	res, err := c.CallTool(context.Background(), req)
	d := time.Since(start)
	if err != nil || res.IsError {
		b.Fatalf("send_message: %v %+v", err, res)
	}
	return d
}

// BenchmarkSendMessage: send_message round trips through one facade (p50,
// p99), against the same client talking to the mcp-go floor.
func BenchmarkSendMessage(b *testing.B) {
	home := benchHome(b)
	relay := benchClient(b, []string{relayBin, "mcp", "--as", "claude", "--home", home, "--no-autostart"})
	floor := benchClient(b, []string{floorBin(b)})
	var rl, fl []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rl = append(rl, send(b, relay, "codex", i))
		fl = append(fl, send(b, floor, "codex", i))
	}
	b.ReportMetric(float64(quantile(rl, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(quantile(rl, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(quantile(fl, 0.5).Microseconds()), "floor-p50-µs")
}

// BenchmarkSendMessage8Facades: throughput with 8 concurrent facades vs 8
// clients of the floor, as messages per second and their ratio.
func BenchmarkSendMessage8Facades(b *testing.B) {
	home := benchHome(b)
	agents := []string{"claude", "codex", "cursor", "gemini", "opencode", "hermes"}
	run := func(clients []*client.Client, to func(i int) string) float64 {
		var wg sync.WaitGroup
		per := b.N/len(clients) + 1
		start := time.Now()
		for k, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					send(b, c, to(k), i)
				}
			}()
		}
		wg.Wait()
		return float64(per*len(clients)) / time.Since(start).Seconds()
	}
	var relays, floors []*client.Client
	for k := 0; k < 8; k++ {
		relays = append(relays, benchClient(b, []string{relayBin, "mcp", "--as", agents[k%6], "--home", home, "--no-autostart"}))
		floors = append(floors, benchClient(b, []string{floorBin(b)}))
	}
	b.ResetTimer()
	r := run(relays, func(k int) string { return agents[(k+1)%6] })
	f := run(floors, func(k int) string { return "x" })
	b.ReportMetric(r, "relay-msg/s")
	b.ReportMetric(f, "floor-msg/s")
	b.ReportMetric(r/f, "ratio")
}

// TestBenchSuiteSmoke runs the suite on its cheap rows at a tiny size, in
// this process against the relay binary, and checks the JSON: every row
// measured (or skipped with a reason), with a floor and a ratio.
func TestBenchSuiteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons and seeds stores")
	}
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := runSuite(context.Background(), &cliIO{stdout: &stdout, stderr: &stderr}, []string{"--relay", relayBin,
		"--rows", "store,send,scale", "--messages", "1000", "--tasks", "100", "--sends", "10", "--iterations", "2", "--json"})
	if err != nil {
		t.Fatalf("relay-bench: %v\n%s", err, stderr.String())
	}
	out := stdout.Bytes()
	var res suiteResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	want := []string{"store_create_message_8", "send_message_8_facades", "send_message_8_vs_inserts", "send_message_latency", "scale_check_inbox", "scale_list_tasks", "scale_tasks_show", "scale_daemon_rss"}
	if len(res.Rows) != len(want) {
		t.Fatalf("rows = %+v, want %v", res.Rows, want)
	}
	for i, r := range res.Rows {
		if r.Name != want[i] {
			t.Errorf("row %d = %s, want %s", i, r.Name, want[i])
		}
		if r.Skipped != "" {
			t.Errorf("%s skipped: %s", r.Name, r.Skipped)
			continue
		}
		if r.Relay <= 0 || r.Floor <= 0 || r.Ratio <= 0 || r.FloorIs == "" {
			t.Errorf("%s: relay %v floor %v ratio %v floor_is %q", r.Name, r.Relay, r.Floor, r.Ratio, r.FloorIs)
		}
	}
	// The send row splits its CPU time by process, read from /proc.
	if n := res.Rows[1].Note; !strings.Contains(n, "relay: clients ") || !strings.Contains(n, "floor: clients ") {
		t.Errorf("send row note = %q, want the CPU split", n)
	}
	if res.Machine["cpus"] == "" {
		t.Errorf("machine = %v", res.Machine)
	}
}
