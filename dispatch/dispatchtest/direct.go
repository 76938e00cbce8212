package dispatchtest

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// DirectSession is the floor dispatch overhead is measured against: the
// agent's own spawn + initialize + session/new with the bare SDK and
// nothing else. stop closes the agent's stdin and waits for it.
func DirectSession(tb testing.TB, bin, cwd string) (stop func()) {
	tb.Helper()
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

// nopClient refuses everything; the floor never prompts.
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
