package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
)

// BenchmarkDispatchOverhead measures Dispatch → Started (spawn, initialize,
// session/new, mode check, Started) against the bare floor measured in the
// same loop: the fake agent's own spawn + initialize + session/new with
// the SDK and nothing else. It reports both and their ratio.
func BenchmarkDispatchOverhead(b *testing.B) {
	bin := dispatchtest.BuildFakeAgent(b)
	dir := b.TempDir()
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		b.Fatal(err)
	}
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "fake", Command: []string{bin}, Enabled: true}}, nil, nil)
	d := dispatch.New(dispatch.Options{Registry: reg, Home: filepath.Join(dir, "home")})
	defer d.Close()
	ctx := context.Background()

	var direct, viaDispatch time.Duration
	n := 0
	floor := func() {
		// The floor: spawn + initialize + session/new, straight SDK.
		t0 := time.Now()
		stop := directSession(b, bin, cwd)
		direct += time.Since(t0)
		stop()
	}
	dispatched := func() {
		// The dispatcher: Dispatch → Started.
		r := newRecorder()
		task := model.Task{ID: "B-" + strconv.Itoa(n), Target: "fake", Prompt: "echo hi", Mode: model.ModeReadOnly, Cwd: cwd}
		t1 := time.Now()
		if err := d.Dispatch(ctx, task, r); err != nil {
			b.Fatal(err)
		}
		r.waitStarted(b)
		viaDispatch += time.Since(t1)
		if out := r.waitFinished(b); out.State != model.StateCompleted {
			b.Fatalf("outcome %+v", out)
		}
	}
	for b.Loop() {
		n++
		// Alternate the order so neither side always runs first.
		if n%2 == 0 {
			floor()
			dispatched()
		} else {
			dispatched()
			floor()
		}
	}
	b.ReportMetric(float64(direct.Nanoseconds())/float64(n), "direct-ns/op")
	b.ReportMetric(float64(viaDispatch.Nanoseconds())/float64(n), "dispatch-ns/op")
	b.ReportMetric(float64(viaDispatch)/float64(direct), "ratio")
}

func directSession(tb testing.TB, bin, cwd string) (stop func()) {
	cmd := exec.Command(bin)
	cmd.Dir = cwd
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	conn := acp.NewClientSideConnection(nopClient{}, stdin, stdout)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		tb.Fatal(err)
	}
	if _, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		tb.Fatal(err)
	}
	return func() {
		_ = stdin.Close()
		_ = cmd.Wait()
		<-conn.Done()
	}
}

var errNop = errors.New("not supported")

type nopClient struct{}

func (nopClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNop
}
func (nopClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNop
}
func (nopClient) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}
func (nopClient) SessionUpdate(context.Context, acp.SessionNotification) error { return nil }
func (nopClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNop
}
func (nopClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNop
}
func (nopClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNop
}
func (nopClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNop
}
func (nopClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNop
}
