package socketapi_test

// The conformance suite of model.Service (model/servicetest), run against
// the socket client: each agent's calls go through a socketapi.Client whose
// identity is fixed to that agent, over a temporary Unix socket, to the
// socket API server in front of the in-process service (machine/service),
// wired by daemontest with the real engine and store but a dispatcher that
// starts no agent. machine/service's own tests run the same suite
// in process, so the two transports are held to the same rules.
//
// This file uses only the package's exported API and no helper of its
// other tests; the service is daemontest's, the one machine/service's
// tests use.

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/cmd/daemontest"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/servicetest"
)

// conformanceOverSocket starts the in-process service (daemontest)
// behind the socket API on a temporary socket, and returns a fixture whose
// agents each call through their own client, and the operator through a
// client without an agent identity, as the CLI's.
func conformanceOverSocket(t *testing.T) servicetest.Fixture {
	t.Helper()
	rig := daemontest.New(t)
	svc, reg := rig.Service, rig.Registry

	dir, err := os.MkdirTemp("", "rl") // a socket path must stay short
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "relay.sock")
	ln, err := socketapi.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := socketapi.NewServer(svc, socketapi.ServerOptions{Version: "conformance", KnownAgent: reg.Known})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var mu sync.Mutex
	clients := map[string]*socketapi.Client{}
	// The operator's client, as the CLI makes it: no agent identity.
	operator := socketapi.NewClient(sock, socketapi.ClientOptions{})
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range clients {
			c.Close()
		}
		mu.Unlock()
		operator.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	return servicetest.Fixture{
		As: func(agent string) model.Service {
			mu.Lock()
			defer mu.Unlock()
			c := clients[agent]
			if c == nil {
				c = socketapi.NewClient(sock, socketapi.ClientOptions{Agent: agent})
				clients[agent] = c
			}
			return c
		},
		Operator:     operator,
		Agents:       []string{"codex", "claude", "gemini"},
		Cwd:          rig.Cwd,
		MessageBytes: daemontest.MessageBytes,
	}
}

func TestServiceConformanceOverSocket(t *testing.T) {
	// No other test of this package builds the fake authority; the built
	// program is removed once the suite is done.
	t.Cleanup(gatestest.RemoveFakeAuthority)
	servicetest.Run(t, conformanceOverSocket)
}
