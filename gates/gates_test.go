package gates_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

func TestMissionLease(t *testing.T) {
	t.Parallel()
	const ok = "M-2026-0001"
	long := strings.Repeat("a", 128)
	tests := []struct {
		name           string
		mission, lease string
		want           model.Code // "" = passes
	}{
		{"hai style", "M-2026-0001", "S-abc.def:1_x", ""},
		{"one char each", "M", "S", ""},
		{"128 chars", long, long, ""},
		{"dots only", "..", ".", ""},
		{"every class", "AZaz09._:-", "-:_.90zaZA", ""},
		{"both missing", "", "", model.CodeMissingMissionID},
		{"mission missing", "", ok, model.CodeMissingMissionID},
		{"lease missing", ok, "", model.CodeMissingLeaseID},
		{"mission invalid before lease missing", "M 1", "", model.CodeInvalidMissionID},
		{"129 chars mission", long + "a", ok, model.CodeInvalidMissionID},
		{"129 chars lease", ok, long + "a", model.CodeInvalidLeaseID},
		{"leading space", " " + ok, ok, model.CodeInvalidMissionID},
		{"trailing space", ok, ok + " ", model.CodeInvalidLeaseID},
		{"only space", " ", ok, model.CodeInvalidMissionID},
		{"trailing newline", ok + "\n", ok, model.CodeInvalidMissionID},
		{"tab", ok, "S-\t1", model.CodeInvalidLeaseID},
		{"NUL", "M\x00", ok, model.CodeInvalidMissionID},
		{"NUL lease", ok, "\x00", model.CodeInvalidLeaseID},
		{"DEL", ok, "S\x7f", model.CodeInvalidLeaseID},
		{"latin accent", "M-é", ok, model.CodeInvalidMissionID},
		{"cyrillic lookalike", "М-1", ok, model.CodeInvalidMissionID},
		{"fullwidth digit", ok, "S-１", model.CodeInvalidLeaseID},
		{"invalid utf8", "M-\xff", ok, model.CodeInvalidMissionID},
		{"slash", "M/1", ok, model.CodeInvalidMissionID},
		{"path traversal", ok, "../S", model.CodeInvalidLeaseID},
		{"shell meta", ok, "S;rm", model.CodeInvalidLeaseID},
		{"plus", "M+1", ok, model.CodeInvalidMissionID},
		{"percent", ok, "S%201", model.CodeInvalidLeaseID},
		{"128 multibyte bytes", strings.Repeat("é", 64), ok, model.CodeInvalidMissionID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := gates.MissionLease(model.Task{MissionID: tt.mission, LeaseID: tt.lease})
			if v.Gate != model.GateMissionLease {
				t.Errorf("gate = %q", v.Gate)
			}
			if v.Passed != (tt.want == "") || v.Code != tt.want {
				t.Fatalf("MissionLease(%q, %q) = passed %v code %q, want code %q (%s)",
					tt.mission, tt.lease, v.Passed, v.Code, tt.want, v.Message)
			}
			if v.Passed {
				return
			}
			if v.Message == "" {
				t.Error("a failing verdict has no message")
			}
			if got := gates.Outcome(v); got != model.StateRejected {
				t.Errorf("Outcome = %q, want rejected", got)
			}
			// The message never echoes the raw ID (it may hold control bytes).
			for _, id := range []string{tt.mission, tt.lease} {
				if len(id) > 2 && strings.Contains(v.Message, id) {
					t.Errorf("message %q echoes the ID %q", v.Message, id)
				}
			}
		})
	}
}

// TestValidIDEveryByte checks the byte class exhaustively against its
// definition.
func TestValidIDEveryByte(t *testing.T) {
	t.Parallel()
	const class = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"
	for c := range 256 {
		want := strings.IndexByte(class, byte(c)) >= 0
		if got := gates.ValidID(string([]byte{byte(c)})); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", byte(c), got, want)
		}
		if got := gates.ValidID("M" + string([]byte{byte(c)}) + "1"); got != want {
			t.Errorf("ValidID(M%q1) = %v, want %v", byte(c), got, want)
		}
	}
	if gates.ValidID("") {
		t.Error(`ValidID("") = true`)
	}
}

func TestACPDenial(t *testing.T) {
	t.Parallel()
	good := model.DispatchPolicy{DeniesAllPermissions: true}
	agent := func(enabled, configured bool) model.AgentInfo {
		return model.AgentInfo{Name: "codex", Enabled: enabled, Configured: configured}
	}
	hardened := func(required, current bool) model.AgentInfo {
		a := agent(true, true)
		a.Hardening = model.AgentHardening{Status: model.HardeningFailed, RequireVerified: required, Current: current,
			CurrentReason: "the last verification did not pass (failed: 1 of 4 attempts NOT STOPPED)"}
		return a
	}
	tests := []struct {
		name   string
		policy model.DispatchPolicy
		agent  model.AgentInfo
		known  bool
		want   model.Code
	}{
		{"all good", good, agent(true, true), true, ""},
		{"permissions not denied", model.DispatchPolicy{}, agent(true, true), true, model.CodeACPDenialNotEnforced},
		{"fs advertised", model.DispatchPolicy{DeniesAllPermissions: true, AdvertisesFS: true}, agent(true, true), true, model.CodeACPDenialNotEnforced},
		{"terminal advertised", model.DispatchPolicy{DeniesAllPermissions: true, AdvertisesTerminal: true}, agent(true, true), true, model.CodeACPDenialNotEnforced},
		{"policy before unknown agent", model.DispatchPolicy{AdvertisesFS: true}, model.AgentInfo{}, false, model.CodeACPDenialNotEnforced},
		{"policy before disabled", model.DispatchPolicy{}, agent(false, false), true, model.CodeACPDenialNotEnforced},
		{"unknown agent", good, model.AgentInfo{Name: "nobody"}, false, model.CodeAgentNotConfigured},
		{"unknown agent even if entry says enabled", good, agent(true, true), false, model.CodeAgentNotConfigured},
		{"disabled", good, agent(false, true), true, model.CodeAgentDisabled},
		{"disabled before not configured", good, agent(false, false), true, model.CodeAgentDisabled},
		{"not configured", good, agent(true, false), true, model.CodeAgentNotConfigured},
		{"require_verified, current", good, hardened(true, true), true, ""},
		{"require_verified, not current", good, hardened(true, false), true, model.CodeAgentNotVerified},
		{"not required, not current", good, hardened(false, false), true, ""},
		{"not configured before not verified", good, func() model.AgentInfo {
			a := hardened(true, false)
			a.Configured = false
			return a
		}(), true, model.CodeAgentNotConfigured},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := gates.ACPDenial(tt.policy, tt.agent, tt.known, model.ModeReadOnly)
			if v.Gate != model.GateACPDenial {
				t.Errorf("gate = %q", v.Gate)
			}
			if v.Passed != (tt.want == "") || v.Code != tt.want {
				t.Fatalf("ACPDenial = passed %v code %q, want %q (%s)", v.Passed, v.Code, tt.want, v.Message)
			}
			if !v.Passed && gates.Outcome(v) != model.StateBlocked {
				t.Errorf("Outcome = %q, want blocked", gates.Outcome(v))
			}
			if v.Code == model.CodeAgentNotVerified && (!strings.Contains(v.Message, "run `relay agents verify codex`") ||
				!strings.Contains(v.Message, "1 of 4 attempts NOT STOPPED") || v.Detail["hardening"] != "failed") {
				t.Errorf("agent_not_verified verdict %q %v: want why and the command to run", v.Message, v.Detail)
			}
		})
	}
}

func TestGuardedClaude(t *testing.T) {
	t.Parallel()
	guarded := model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceGuarded}
	standard := model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceStandard}
	unset := model.AuthorityAnswer{Allow: true}
	tests := []struct {
		name   string
		mode   model.Mode
		target string
		ans    model.AuthorityAnswer
		pass   bool
	}{
		{"read_only codex standard", model.ModeReadOnly, "codex", standard, true},
		{"read_only claude unset", model.ModeReadOnly, "claude", unset, true},
		{"read_only gemini guarded", model.ModeReadOnly, "gemini", guarded, true},
		{"empty mode is read_only", "", "codex", unset, true},
		{"state_changing claude guarded", model.ModeStateChanging, "claude", guarded, true},
		{"state_changing claude standard", model.ModeStateChanging, "claude", standard, false},
		{"state_changing claude no assurance", model.ModeStateChanging, "claude", unset, false},
		{"state_changing codex guarded", model.ModeStateChanging, "codex", guarded, false},
		{"state_changing Claude (case) guarded", model.ModeStateChanging, "Claude", guarded, false},
		{"state_changing claude-2 guarded", model.ModeStateChanging, "claude-2", guarded, false},
		{"unknown mode is state_changing: codex", "yolo", "codex", guarded, false},
		{"unknown mode is state_changing: claude standard", "yolo", "claude", standard, false},
		{"unknown mode is state_changing: claude guarded", "yolo", "claude", guarded, true},
		{"unknown assurance", model.ModeStateChanging, "claude", model.AuthorityAnswer{Allow: true, Assurance: "Guarded"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := gates.GuardedClaude(model.Task{Mode: tt.mode, Target: tt.target}, tt.ans)
			if v.Gate != model.GateGuardedClaude {
				t.Errorf("gate = %q", v.Gate)
			}
			if v.Passed != tt.pass {
				t.Fatalf("GuardedClaude = passed %v (%s), want %v", v.Passed, v.Message, tt.pass)
			}
			if tt.pass {
				if v.Code != "" {
					t.Errorf("passing verdict has code %q", v.Code)
				}
				return
			}
			if v.Code != model.CodeStateChangingRequiresGuardedClaude {
				t.Errorf("code = %q", v.Code)
			}
			if gates.Outcome(v) != model.StateRejected {
				t.Errorf("Outcome = %q, want rejected", gates.Outcome(v))
			}
		})
	}
}

// TestOutcome checks every gate code against the state it leads to
// (spec/errors.md: rejected for a policy decision, blocked when a gate
// fails closed) and the fail-closed default.
func TestOutcome(t *testing.T) {
	t.Parallel()
	want := map[model.Code]model.State{
		model.CodeMissingMissionID:                   model.StateRejected,
		model.CodeMissingLeaseID:                     model.StateRejected,
		model.CodeInvalidMissionID:                   model.StateRejected,
		model.CodeInvalidLeaseID:                     model.StateRejected,
		model.CodeACPDenialNotEnforced:               model.StateBlocked,
		model.CodeAgentDisabled:                      model.StateBlocked,
		model.CodeAgentNotConfigured:                 model.StateBlocked,
		model.CodeAuthorityNotConfigured:             model.StateBlocked,
		model.CodeAuthorityUnavailable:               model.StateBlocked,
		model.CodeAuthorityTimeout:                   model.StateBlocked,
		model.CodeAuthorityInvalidResponse:           model.StateBlocked,
		model.CodeAuthorityDenied:                    model.StateRejected,
		model.CodeStateChangingRequiresGuardedClaude: model.StateRejected,
		// Not gate codes: fail closed.
		"no_such_code":          model.StateBlocked,
		"":                      model.StateBlocked,
		model.CodeTaskTimeout:   model.StateBlocked, // leads to failed, not a gate outcome
		model.CodeInternal:      model.StateBlocked,
		model.CodeInvalidConfig: model.StateBlocked,
	}
	for code, state := range want {
		if got := gates.Outcome(model.Verdict{Code: code}); got != state {
			t.Errorf("Outcome(%q) = %q, want %q", code, got, state)
		}
		if ci, ok := spec.Lookup(code); ok && ci.Kind == spec.KindTask &&
			(ci.State == model.StateRejected || ci.State == model.StateBlocked) && ci.State != state {
			t.Errorf("catalogue says %q → %q, test says %q", code, ci.State, state)
		}
	}
	if got := gates.Outcome(model.Verdict{Passed: true, Code: model.CodeAuthorityDenied}); got != "" {
		t.Errorf("Outcome(passed) = %q, want empty", got)
	}
}

// stubAuthority is an in-process model.Authority, to check that the gate
// re-validates answers from any implementation.
type stubAuthority struct {
	ans model.AuthorityAnswer
	err error
	got []model.AuthorityRequest
}

func (s *stubAuthority) Consult(_ context.Context, req model.AuthorityRequest) (model.AuthorityAnswer, error) {
	s.got = append(s.got, req)
	return s.ans, s.err
}

func TestAuthorityGateStub(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ans       model.AuthorityAnswer
		err       error
		want      model.Code
		assurance string
	}{
		{"allow guarded", model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceGuarded}, nil, "", "guarded"},
		{"allow unset is standard", model.AuthorityAnswer{Allow: true}, nil, "", "standard"},
		{"allow unknown assurance", model.AuthorityAnswer{Allow: true, Assurance: "Guarded"}, nil, model.CodeAuthorityInvalidResponse, ""},
		{"deny with code", model.AuthorityAnswer{DenyCode: "lease_revoked", Message: "revoked"}, nil, model.CodeAuthorityDenied, ""},
		{"deny without code", model.AuthorityAnswer{}, nil, model.CodeAuthorityInvalidResponse, ""},
		{"timeout error", model.AuthorityAnswer{ExitCode: -1}, model.Errorf(model.CodeAuthorityTimeout, "slow"), model.CodeAuthorityTimeout, ""},
		{"not configured error", model.AuthorityAnswer{}, model.Errorf(model.CodeAuthorityNotConfigured, "none"), model.CodeAuthorityNotConfigured, ""},
		{"plain error", model.AuthorityAnswer{}, errors.New("boom"), model.CodeAuthorityUnavailable, ""},
		{"foreign code", model.AuthorityAnswer{}, model.Errorf(model.CodeNotFound, "?"), model.CodeAuthorityUnavailable, ""},
		{"error beats allow", model.AuthorityAnswer{Allow: true}, model.Errorf(model.CodeAuthorityInvalidResponse, "bad"), model.CodeAuthorityInvalidResponse, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &stubAuthority{ans: tt.ans, err: tt.err}
			v, ans := gates.Authority(context.Background(), s, model.AuthorityRequest{TaskID: "T-1"})
			if len(s.got) != 1 {
				t.Fatalf("Consult called %d times, want 1", len(s.got))
			}
			if s.got[0].RequestID == "" || s.got[0].RequestedAt.IsZero() {
				t.Errorf("request not completed: %+v", s.got[0])
			}
			if v.Gate != model.GateAuthority || v.Passed != (tt.want == "") || v.Code != tt.want {
				t.Fatalf("verdict = %+v, want code %q", v, tt.want)
			}
			if v.Detail["request_id"] != s.got[0].RequestID {
				t.Errorf("detail request_id = %q, want %q", v.Detail["request_id"], s.got[0].RequestID)
			}
			if tt.assurance != "" {
				if v.Detail["assurance"] != tt.assurance || string(ans.Assurance) != tt.assurance {
					t.Errorf("assurance: detail %q answer %q, want %q", v.Detail["assurance"], ans.Assurance, tt.assurance)
				}
			}
			if tt.want == model.CodeAuthorityDenied && v.Detail["adapter_code"] != "lease_revoked" {
				t.Errorf("adapter_code = %q", v.Detail["adapter_code"])
			}
		})
	}
}

func TestAuthorityGateNil(t *testing.T) {
	t.Parallel()
	for _, a := range []model.Authority{
		nil,
		gates.NewAuthority(nil, 0),
		gates.NewAuthority([]string{}, 0),
		gates.NewAuthority([]string{"", "x"}, 0),
	} {
		if a != nil {
			t.Fatalf("NewAuthority without a program = %#v, want nil", a)
		}
		v, _ := gates.Authority(context.Background(), a, model.AuthorityRequest{})
		if v.Passed || v.Code != model.CodeAuthorityNotConfigured || gates.Outcome(v) != model.StateBlocked {
			t.Errorf("verdict = %+v", v)
		}
	}
}

// The delegation gate refuses a task whose target already takes part in
// its chain, as a caller or a target anywhere in it (the task's own caller
// included), and one deeper than the bound; a top-level task always
// passes. A loop is told before depth.
func TestDelegation(t *testing.T) {
	t.Parallel()
	hop := func(id, caller, target string) model.Hop {
		return model.Hop{TaskID: id, Caller: caller, Target: target}
	}
	chain := func(hops ...model.Hop) []model.Hop { return hops }
	for _, c := range []struct {
		name           string
		chain          []model.Hop
		caller, target string
		max            int
		want           model.Code
		path           string
	}{
		{"top-level", nil, "claude", "codex", 1, "", ""},
		{"top-level to itself", nil, "codex", "codex", 1, "", ""},
		{"one level down", chain(hop("T-1", "claude", "codex")), "codex", "gemini", 3, "", "claude → codex → gemini"},
		{"back to the first caller", chain(hop("T-1", "codex", "gemini")), "gemini", "codex", 3, model.CodeDelegationCycle, "codex → gemini → codex"},
		{"back to a middle target", chain(hop("T-1", "claude", "codex"), hop("T-2", "codex", "gemini")), "gemini", "codex", 3, model.CodeDelegationCycle, "claude → codex → gemini → codex"},
		{"to itself inside a task", chain(hop("T-1", "claude", "codex")), "codex", "codex", 3, model.CodeDelegationCycle, "claude → codex → codex"},
		{"to the facade's own identity", chain(hop("T-1", "claude", "codex")), "gemini", "gemini", 3, model.CodeDelegationCycle, "claude → codex (as gemini) → gemini"},
		{"to an agent that only called", chain(hop("T-1", "claude", "codex"), hop("T-2", "hermes", "gemini")), "gemini", "hermes", 9, model.CodeDelegationCycle, "claude → codex (as hermes) → gemini → hermes"},
		{"at the bound", chain(hop("T-1", "claude", "codex"), hop("T-2", "codex", "gemini")), "gemini", "opencode", 3, "", "claude → codex → gemini → opencode"},
		{"past the bound", chain(hop("T-1", "claude", "codex"), hop("T-2", "codex", "gemini")), "gemini", "opencode", 2, model.CodeDelegationTooDeep, "claude → codex → gemini → opencode"},
		{"a loop past the bound is a loop", chain(hop("T-1", "claude", "codex"), hop("T-2", "codex", "gemini")), "gemini", "claude", 2, model.CodeDelegationCycle, "claude → codex → gemini → claude"},
		{"no sub-delegation at all", chain(hop("T-1", "claude", "codex")), "codex", "gemini", 1, model.CodeDelegationTooDeep, "claude → codex → gemini"},
		{"zero bound is the default", chain(hop("T-1", "claude", "codex"), hop("T-2", "codex", "gemini"), hop("T-3", "gemini", "opencode")), "opencode", "cursor", 0, model.CodeDelegationTooDeep, "claude → codex → gemini → opencode → cursor"},
	} {
		task := model.Task{ID: "T-9", Caller: c.caller, Target: c.target, Chain: c.chain}
		if len(c.chain) > 0 {
			task.ParentTaskID = c.chain[len(c.chain)-1].TaskID
		}
		v := gates.Delegation(task, c.max)
		if v.Gate != model.GateDelegation || v.Passed != (c.want == "") || v.Code != c.want {
			t.Errorf("%s: verdict %+v, want code %q", c.name, v, c.want)
			continue
		}
		if c.path != "" && (v.Detail["path"] != c.path || !strings.Contains(v.Message, c.path) || v.Detail["parent_task_id"] != task.ParentTaskID) {
			t.Errorf("%s: message %q detail %v, want the path %q and the parent", c.name, v.Message, v.Detail, c.path)
		}
		if c.want != "" && gates.Outcome(v) != model.StateRejected {
			t.Errorf("%s: outcome %s, want rejected", c.name, gates.Outcome(v))
		}
	}
}

func TestNewAuthorityRequest(t *testing.T) {
	t.Parallel()
	task := model.Task{ID: "T-1", MissionID: "M-1", LeaseID: "S-1", Caller: "codex", Target: "claude"}
	r1 := gates.NewAuthorityRequest(task, testTime)
	r2 := gates.NewAuthorityRequest(task, testTime)
	if len(r1.RequestID) != 32 || r1.RequestID == r2.RequestID {
		t.Errorf("request IDs %q, %q: want distinct 32-hex IDs", r1.RequestID, r2.RequestID)
	}
	if r1.Mode != model.ModeReadOnly {
		t.Errorf("empty mode sent as %q, want read_only", r1.Mode)
	}
	if !r1.RequestedAt.Equal(testTime) || r1.RequestedAt.Location().String() != "UTC" {
		t.Errorf("requested at %v", r1.RequestedAt)
	}
	if r1.TaskID != "T-1" || r1.MissionID != "M-1" || r1.LeaseID != "S-1" || r1.Caller != "codex" || r1.Target != "claude" {
		t.Errorf("request = %+v", r1)
	}
	if r1.ParentTaskID != "" || len(r1.Chain) != 0 {
		t.Errorf("a top-level task's request has parent %q and chain %v", r1.ParentTaskID, r1.Chain)
	}
	task.ParentTaskID, task.Chain = "T-0", []model.Hop{{TaskID: "T-0", Caller: "gemini", Target: "codex"}}
	if r := gates.NewAuthorityRequest(task, testTime); r.ParentTaskID != "T-0" || len(r.Chain) != 1 || r.Chain[0] != task.Chain[0] {
		t.Errorf("a delegated task's request has parent %q and chain %v", r.ParentTaskID, r.Chain)
	}
}

// A passing acpDenial verdict describes the profile's rule for the task's
// own mode: a state_changing task to an agent whose profile has no rule for
// it says so, never the read_only rule.
func TestACPDenialDescribesTheTasksMode(t *testing.T) {
	t.Parallel()
	agent := model.AgentInfo{Name: "codex", Enabled: true, Configured: true, Profile: model.AgentProfile{
		Name: "codex-acp 2.x", Summary: "hardening profile codex-acp 2.x; read_only: sandbox read-only",
		Modes: map[model.Mode]string{model.ModeReadOnly: "sandbox read-only", model.ModeStateChanging: "refused (agent_unsafe_mode)"}}}
	policy := model.DispatchPolicy{DeniesAllPermissions: true}
	sc := gates.ACPDenial(policy, agent, true, model.ModeStateChanging)
	if !sc.Passed || !strings.Contains(sc.Message, "for state_changing tasks: refused (agent_unsafe_mode)") || strings.Contains(sc.Message, "sandbox read-only") {
		t.Errorf("state_changing: %+v", sc)
	}
	ro := gates.ACPDenial(policy, agent, true, model.ModeReadOnly)
	if !ro.Passed || !strings.Contains(ro.Message, "for read_only tasks: sandbox read-only") {
		t.Errorf("read_only: %+v", ro)
	}
}
