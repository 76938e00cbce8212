package socketapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hai-relay/relay/model"
)

// A daemon serves a model.Service on its socket; a facade's client acts as
// the agent it was launched as.
func ExampleNewClient() {
	dir, _ := os.MkdirTemp("", "rl") // 0700, as the relay home is
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "relay.sock")

	ln, err := Listen(sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := NewServer(&apiFakeService{}, ServerOptions{Version: "1.0.0"})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown(context.Background()); <-done }()

	c := NewClient(sock, ClientOptions{Agent: "claude"})
	defer c.Close()
	ctx := context.Background()
	t, err := c.SubmitTask(ctx, "", model.SubmitRequest{Target: "codex", Prompt: "review the diff"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.ID, t.State, t.Caller, "->", t.Target)

	// Errors keep their stable code across the socket.
	none := NewClient(filepath.Join(dir, "nobody.sock"), ClientOptions{Agent: "claude"})
	_, err = none.GetTask(ctx, "", t.ID)
	fmt.Println(model.ErrorCode(err))
	// Output:
	// T-1 submitted claude -> codex
	// daemon_unavailable
}
