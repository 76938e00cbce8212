package socketapi_test

// The conformance suite of model.Service (model/servicetest), run against
// the socket client: each agent's calls go through a socketapi.Client whose
// identity is fixed to that agent, over a temporary Unix socket, to the
// socket API server in front of the in-process service (machine/service)
// as the daemon wires it. machine/service's own tests run the same suite
// in process, so the two transports are held to the same rules.
//
// This file is self-contained: it uses only the package's exported API
// and no helper of its other tests.

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/machine/service"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/servicetest"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// conformanceMessageBytes is the service's limits.message_bytes: small,
// so the suite's oversized payloads stay small too.
const conformanceMessageBytes = 4096

// conformanceRegistry knows the core agents, all enabled and configured.
type conformanceRegistry map[string]model.AgentInfo

func (r conformanceRegistry) Known(name string) bool { _, ok := r[name]; return ok }

func (r conformanceRegistry) Agent(_ context.Context, name string) (model.AgentInfo, bool) {
	a, ok := r[name]
	return a, ok
}

func (r conformanceRegistry) Agents(context.Context) []model.AgentInfo {
	var out []model.AgentInfo
	for _, n := range model.CoreAgents() {
		out = append(out, r[n])
	}
	return out
}

// conformanceDispatcher keeps the deny-all promise and starts nothing: an
// authorized task stays authorized until it is canceled.
type conformanceDispatcher struct{}

func (conformanceDispatcher) Policy() model.DispatchPolicy {
	return model.DispatchPolicy{DeniesAllPermissions: true}
}

func (conformanceDispatcher) Dispatch(context.Context, model.Task, model.RunReporter) error {
	return nil
}

func (conformanceDispatcher) Cancel(string) {}

// conformanceOverSocket starts the in-process service (real SQLite on a
// temporary file, the real engine, the fake authority adapter program)
// behind the socket API on a temporary socket, and returns a fixture whose
// agents each call through their own client.
func conformanceOverSocket(t *testing.T, bin string) servicetest.Fixture {
	t.Helper()
	reg := conformanceRegistry{}
	for _, n := range model.CoreAgents() {
		reg[n] = model.AgentInfo{Name: n, Enabled: true, Configured: true}
	}
	db := persistencetest.MustOpenTemp(t)
	eng := machine.New(machine.Options{Store: db, Dispatcher: conformanceDispatcher{}, Registry: reg,
		Authority:   gates.NewAuthority([]string{bin, "allow-guarded"}, 10*time.Second),
		MaxDispatch: 64, MaxPromptBytes: conformanceMessageBytes, NotifySubmitter: true})
	svc := service.New(service.Options{Engine: eng, Store: db, Messages: db, Registry: reg,
		MessageBytes: conformanceMessageBytes})

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
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range clients {
			c.Close()
		}
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := eng.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
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
		Agents:       []string{"codex", "claude", "gemini"},
		Cwd:          t.TempDir(),
		MessageBytes: conformanceMessageBytes,
	}
}

func TestServiceConformanceOverSocket(t *testing.T) {
	// No other test of this package builds the fake authority; the built
	// program is removed once the suite is done.
	t.Cleanup(gatestest.RemoveFakeAuthority)
	bin := gatestest.BuildFakeAuthority(t)
	servicetest.Run(t, func(t *testing.T) servicetest.Fixture { return conformanceOverSocket(t, bin) })
}
