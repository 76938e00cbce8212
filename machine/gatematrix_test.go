package machine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// Every combination of gate outcomes, exhaustively, with the real fake
// adapter program as the authority. The expected outcome is computed by an
// oracle written from the documented gate rules (the guards of
// spec/lifecycle.dot, the codes of spec/errors.md), independently of the
// engine's code.

type idsCase struct{ name, mission, lease string }

var idsCases = []idsCase{
	{"ids-ok", "M-2026.11:alpha_1", "S-42"},
	{"mission-missing", "", "S-42"},
	{"lease-missing", "M-1", ""},
	{"mission-malformed", "M 1", "S-42"},
}

var targetStates = []string{"ready", "disabled", "not-configured"}

// authorityModes are fake adapter modes; "" is no adapter configured.
var authorityModes = []string{"", "allow-guarded", "allow-standard", "deny", "sleep", "crash",
	"exit-allow", "garbage", "oversized", "empty"}

type expectation struct {
	state model.State
	code  model.Code
	runs  int
}

func oracle(ids idsCase, target, targetState, auth string, mode model.Mode) expectation {
	switch ids.name {
	case "mission-missing":
		return expectation{model.StateRejected, model.CodeMissingMissionID, 0}
	case "lease-missing":
		return expectation{model.StateRejected, model.CodeMissingLeaseID, 0}
	case "mission-malformed":
		return expectation{model.StateRejected, model.CodeInvalidMissionID, 0}
	}
	switch targetState {
	case "disabled":
		return expectation{model.StateBlocked, model.CodeAgentDisabled, 0}
	case "not-configured":
		return expectation{model.StateBlocked, model.CodeAgentNotConfigured, 0}
	}
	var guarded bool
	switch auth {
	case "":
		return expectation{model.StateBlocked, model.CodeAuthorityNotConfigured, 0}
	case "allow-guarded":
		guarded = true
	case "allow-standard":
	case "deny":
		return expectation{model.StateRejected, model.CodeAuthorityDenied, 1}
	case "sleep":
		return expectation{model.StateBlocked, model.CodeAuthorityTimeout, 1}
	case "crash", "exit-allow":
		return expectation{model.StateBlocked, model.CodeAuthorityUnavailable, 1}
	case "garbage", "oversized", "empty":
		return expectation{model.StateBlocked, model.CodeAuthorityInvalidResponse, 1}
	}
	if mode == model.ModeStateChanging && !(target == "claude" && guarded) {
		return expectation{model.StateRejected, model.CodeStateChangingRequiresGuardedClaude, 1}
	}
	return expectation{model.StateAuthorized, "", 1}
}

func TestGateMatrix(t *testing.T) {
	t.Parallel()
	bin := gatestest.BuildFakeAuthority(t)
	db := persistencetest.MustOpenTemp(t)
	cwd := t.TempDir()
	ctx := context.Background()

	for _, ids := range idsCases {
		for _, ts := range targetStates {
			for _, auth := range authorityModes {
				for _, mode := range model.AllModes() {
					for _, target := range []string{"claude", "codex"} {
						name := fmt.Sprintf("%s/%s/%s/%s/%s", ids.name, ts, orNone(auth), mode, target)
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							want := oracle(ids, target, ts, auth, mode)
							reg := healthyRegistry()
							a := reg[target]
							a.Enabled = ts != "disabled"
							a.Configured = ts != "not-configured"
							reg[target] = a

							logPath := filepath.Join(t.TempDir(), "authority.log")
							var authority model.Authority
							if auth != "" {
								authority = gates.NewAuthority([]string{bin, "-log", logPath, auth}, 3*time.Second)
							}
							disp := &fakeDispatcher{policy: denyAll}
							eng := machine.New(machine.Options{Store: db, Dispatcher: disp, Registry: reg, Authority: authority})
							defer eng.Stop(ctx)

							task, _, err := eng.Submit(ctx, "gemini", model.SubmitRequest{Target: target, Prompt: "review the diff",
								MissionID: ids.mission, LeaseID: ids.lease, Mode: mode, Cwd: cwd})
							if err != nil {
								t.Fatalf("submit: %v", err)
							}
							// The gates run after Submit answered.
							task = settle(t, eng, task.ID)
							if task.State == model.StateAuthorized {
								eventually(t, "the dispatch", func() bool { return disp.count(task.ID) == 1 })
							}
							runs := 0
							if auth != "" {
								runs = len(gatestest.ReadFakeLog(t, logPath))
							}
							if task.State != want.state || task.Code != want.code || runs != want.runs {
								t.Fatalf("got %s/%s with %d adapter runs, want %s/%s with %d",
									task.State, task.Code, runs, want.state, want.code, want.runs)
							}
							wantDispatch := 0
							if want.state == model.StateAuthorized {
								wantDispatch = 1
							}
							if n := disp.count(task.ID); n != wantDispatch {
								t.Fatalf("%d dispatches, want %d", n, wantDispatch)
							}
							// The evidence: one verdict per gate that ran, the last
							// one deciding, recorded with the transition.
							vs, err := db.TaskVerdicts(ctx, task.ID)
							if err != nil {
								t.Fatal(err)
							}
							if len(vs) == 0 || vs[len(vs)-1].Passed != (want.state == model.StateAuthorized) {
								t.Fatalf("verdicts %+v", vs)
							}
							for i, v := range vs {
								if v.Gate != model.AllGates()[i] {
									t.Fatalf("verdict %d is %s, want %s (gate order)", i, v.Gate, model.AllGates()[i])
								}
							}
							if want.code != "" && vs[len(vs)-1].Code != want.code {
								t.Fatalf("deciding verdict code %s, want %s", vs[len(vs)-1].Code, want.code)
							}
							if want.code == model.CodeAuthorityDenied && vs[len(vs)-1].Detail["adapter_code"] != "lease_expired" {
								t.Fatalf("deny verdict lost the adapter's own code: %+v", vs[len(vs)-1])
							}
						})
					}
				}
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no-authority"
	}
	return s
}
