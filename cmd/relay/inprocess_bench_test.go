package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/facade/mcpserver"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// In-process versions of relay-bench's send and scale rows, for pprof: the
// daemon and the facades run in the test binary (the facades over pipes),
// so
//
//	go test -run '^$' -bench InProcess -benchtime 2000x -cpuprofile cpu.out ./cmd/relay
//
// profiles the whole path: MCP client → facade → socket → daemon → SQLite.
// They stay beside the daemon they start in-process; the suite itself
// (cmd/relay-bench) drives the relay binary from outside.

// inProcessBody is a ~64-byte message body, as relay-bench sends.
const inProcessBody = "a short passive message of about sixty-four bytes, give or take."

// inProcessDaemonAt runs a daemon on home in this process.
func inProcessDaemonAt(b *testing.B, home string) string {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&daemon{home: home, stderr: io.Discard}).run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("daemon: %v", err)
		}
	})
	c := socketapi.NewClient(sockPath(home), socketapi.ClientOptions{})
	defer c.Close()
	for i := 0; ; i++ {
		if _, err := c.Version(context.Background()); err == nil {
			return home
		}
		if i > 500 {
			b.Fatal("daemon did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inProcessFacade serves an MCP facade for agent over pipes and returns
// an initialized client of it.
func inProcessFacade(b *testing.B, home, agent string) *client.Client {
	b.Helper()
	cIn, sOut := io.Pipe() // server → client
	sIn, cOut := io.Pipe() // client → server
	svc := dial(home, agent, false, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mcpserver.Serve(ctx, svc, mcpserver.Options{Agent: agent, Cwd: os.TempDir(), Version: "bench"}, sIn, sOut)
	}()
	c := client.NewClient(transport.NewIO(cIn, cOut, io.NopCloser(nil)))
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		cOut.Close()
		sOut.Close()
		<-done
		svc.Close()
	})
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	ir.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		b.Fatal(err)
	}
	return c
}

func BenchmarkInProcessSend8(b *testing.B) {
	// Nobody acknowledges: no inbox quota, as relay-bench's send row.
	home := filepath.Join(b.TempDir(), "h")
	if err := os.MkdirAll(home, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[limits]\ninbox_messages = 0\ninbox_bytes = 0\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	inProcessDaemonAt(b, home)
	agents := model.CoreAgents()
	var cs []*client.Client
	for k := range 8 {
		cs = append(cs, inProcessFacade(b, home, agents[k%6]))
	}
	per := b.N/8 + 1
	b.ResetTimer()
	var wg sync.WaitGroup
	for k, c := range cs {
		wg.Go(func() {
			for range per {
				if err := mcpgoCall(context.Background(), c, "send_message", map[string]any{"to": agents[(k+1)%6], "body": inProcessBody}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(per*8)/b.Elapsed().Seconds(), "msgs/s")
}

// inProcessSeededDaemon is inProcessDaemonAt on a fresh home seeded first.
func inProcessSeededDaemon(b *testing.B, messages, tasks int) string {
	b.Helper()
	dir := b.TempDir()
	home := filepath.Join(dir, "h")
	if err := os.MkdirAll(home, 0o700); err != nil {
		b.Fatal(err)
	}
	db, err := persistence.Open(context.Background(), dbPath(home), persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := persistencetest.Seed(context.Background(), db, persistencetest.SeedOptions{Messages: messages, Tasks: tasks}); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return inProcessDaemonAt(b, home)
}

func benchInProcessTool(b *testing.B, tool string) {
	home := inProcessSeededDaemon(b, 100_000, 10_000)
	agents := model.CoreAgents()
	var cs []*client.Client
	for _, a := range agents {
		cs = append(cs, inProcessFacade(b, home, a))
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := mcpgoCall(context.Background(), cs[i%len(cs)], tool, map[string]any{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	q := func(f float64) float64 {
		return float64(lat[min(len(lat)-1, int(math.Ceil(f*float64(len(lat))))-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

func BenchmarkInProcessListTasks(b *testing.B)  { benchInProcessTool(b, "list_tasks") }
func BenchmarkInProcessCheckInbox(b *testing.B) { benchInProcessTool(b, "check_inbox") }

// mcpgoCall calls a tool through an mcp-go client and fails on a tool error.
func mcpgoCall(ctx context.Context, c *client.Client, name string, args map[string]any) error {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return fmt.Errorf("%s: tool error: %+v", name, res.Content)
	}
	return nil
}
