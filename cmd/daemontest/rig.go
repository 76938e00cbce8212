// Package daemontest builds the in-process service for tests from the
// daemon's own parts where they start no agent, and from stand-ins where
// they would: real SQLite on a temporary file, the real engine and
// service, and the fake authority adapter, a real program (allow,
// guarded), as the authority; but a registry of the core agents (all
// enabled and configured, whose probes and verifications start nothing
// and fail) and a fake dispatcher that keeps the deny-all promise and
// starts nothing, so an authorized task stays authorized until it is
// canceled. It is not the daemon's wiring (cmd/relay/daemon.go: config,
// the real registry and dispatcher, the socket): what it tests is the
// service and the engine. machine/service's tests call it directly, and
// facade/socketapi's put the socket API in front of it, so that the
// conformance suite (model/servicetest) runs against both. It is a test
// library, not a command: it lives under cmd because it wires
// persistence, which only cmd may import, and its name ends in "test",
// which keeps it out of the product (cmd/relay/deps_test.go).
package daemontest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/machine/service"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// MessageBytes is the rig's limits.message_bytes: small, so the suite's
// oversized payloads stay small too.
const MessageBytes = 4096

// Registry knows the core agents, all enabled and configured.
type Registry map[string]model.AgentInfo

// NewRegistry returns a Registry of the core agents.
func NewRegistry() Registry {
	r := Registry{}
	for _, n := range model.CoreAgents() {
		r[n] = model.AgentInfo{Name: n, Enabled: true, Configured: true}
	}
	return r
}

func (r Registry) Known(name string) bool { _, ok := r[name]; return ok }

func (r Registry) Agent(_ context.Context, name string) (model.AgentInfo, bool) {
	a, ok := r[name]
	return a, ok
}

func (r Registry) Agents(context.Context) []model.AgentInfo {
	var out []model.AgentInfo
	for _, n := range model.CoreAgents() {
		out = append(out, r[n])
	}
	return out
}

// probe is the rig's live probe: it starts no agent, so every probe
// fails, and a failed probe is an answer (the entry, with the reason).
func (r Registry) probe(_ context.Context, name string, _ time.Duration) (model.AgentInfo, error) {
	a := r[name]
	a.WorkedLive, a.WorkedLiveReason = false, "the service rig starts no agent"
	return a, errors.New(a.WorkedLiveReason)
}

// verify is the rig's hardening verification: it starts no agent, so
// nothing is verified.
func (r Registry) verify(_ context.Context, name string, _ time.Duration) (model.Verification, error) {
	return model.Verification{Agent: name, Status: model.HardeningUnverified, At: time.Now().UTC(),
		Reason: "the service rig starts no agent", Attempts: []model.VerifyAttempt{}}, nil
}

// dispatcher keeps the deny-all promise and starts nothing: an authorized
// task stays authorized until it is canceled.
type dispatcher struct{}

func (dispatcher) Policy() model.DispatchPolicy {
	return model.DispatchPolicy{DeniesAllPermissions: true}
}
func (dispatcher) Dispatch(context.Context, model.Task, model.RunReporter) error { return nil }
func (dispatcher) Cancel(string)                                                 {}

// Rig is one wired service.
type Rig struct {
	DB       *persistence.DB
	Engine   *machine.Engine
	Service  *service.Service
	Registry Registry
	Cwd      string // a temporary directory, for tasks
}

// New wires a Rig. The engine stops when the test ends (after the
// cleanups registered later, such as a server in front of the service).
// The fake authority is built once per test binary; call
// gatestest.RemoveFakeAuthority when the tests are done.
func New(t *testing.T) *Rig {
	t.Helper()
	db := persistencetest.MustOpenTemp(t)
	reg := NewRegistry()
	auth := gates.NewAuthority([]string{gatestest.BuildFakeAuthority(t), "allow-guarded"}, 10*time.Second)
	eng := machine.New(machine.Options{Store: db, Dispatcher: dispatcher{}, Registry: reg, Authority: auth,
		MaxDispatch: 64, MaxPromptBytes: MessageBytes, NotifySubmitter: true})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	svc := service.New(service.Options{Engine: eng, Store: db, Messages: db, Registry: reg, MessageBytes: MessageBytes,
		Probe: reg.probe, Verify: reg.verify})
	return &Rig{DB: db, Engine: eng, Service: svc, Registry: reg, Cwd: t.TempDir()}
}
