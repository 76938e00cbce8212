package gates

import (
	"strconv"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// MaxIDLength is the longest mission or lease ID the missionLease gate
// accepts, in bytes (every accepted character is one byte).
const MaxIDLength = 128

// ClaudeAgent is the only target that may run state_changing tasks.
const ClaudeAgent = "claude"

// idByte reports, per byte, whether it belongs to [A-Za-z0-9._:-].
var idByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['.'], t['_'], t[':'], t['-'] = true, true, true, true
	return t
}()

// checkID reports why id is not 1–MaxIDLength characters of
// [A-Za-z0-9._:-], or "" when it is. Nothing is trimmed or normalised: a
// byte outside the class (space, control character, any byte of a non-ASCII
// UTF-8 sequence) makes the ID invalid. The reason never echoes the ID.
func checkID(id string) string {
	if len(id) > MaxIDLength {
		return "it is " + strconv.Itoa(len(id)) + " bytes long; at most " + strconv.Itoa(MaxIDLength) + " are allowed"
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return "byte " + strconv.Itoa(i) + " is 0x" + strconv.FormatUint(uint64(id[i]), 16) +
				", outside [A-Za-z0-9._:-]"
		}
	}
	return ""
}

// ValidID reports whether id is 1–128 characters of [A-Za-z0-9._:-], the
// shape the missionLease gate requires of mission and lease IDs.
func ValidID(id string) bool { return id != "" && checkID(id) == "" }

// MissionLease is the missionLease gate: the task's mission ID and lease ID
// are present and each is 1–128 characters of [A-Za-z0-9._:-], taken exactly
// as given (no trimming, no case folding, no Unicode normalisation). The
// mission ID is checked first, then the lease ID. Their meaning (expiry,
// revocation) is the authority's business, not this gate's.
//
// Failing codes: missing_mission_id, invalid_mission_id, missing_lease_id,
// invalid_lease_id, all leading to rejected.
func MissionLease(t model.Task) model.Verdict {
	if v, bad := checkField(t.MissionID, "mission_id", model.CodeMissingMissionID, model.CodeInvalidMissionID); bad {
		return v
	}
	if v, bad := checkField(t.LeaseID, "lease_id", model.CodeMissingLeaseID, model.CodeInvalidLeaseID); bad {
		return v
	}
	return model.Verdict{Gate: model.GateMissionLease, Passed: true,
		Message: "mission_id and lease_id are well formed"}
}

func checkField(id, field string, missing, invalid model.Code) (model.Verdict, bool) {
	if id == "" {
		return fail(model.GateMissionLease, missing, field+" is missing", map[string]string{"field": field}), true
	}
	if reason := checkID(id); reason != "" {
		return fail(model.GateMissionLease, invalid,
			field+" is not 1–128 characters of [A-Za-z0-9._:-]: "+reason,
			map[string]string{"field": field, "reason": reason}), true
	}
	return model.Verdict{}, false
}

// Delegation is the delegation gate: a task submitted inside another task
// (t.Chain is not empty) passes only when its target takes part in its
// chain neither as a caller nor as a target (else delegation_cycle: the
// work would go back to an agent already waiting for it) and its depth,
// t.Depth(), is at most maxDepth (else delegation_too_deep). A loop is
// told before depth. A top-level task always passes: its caller is no
// agent's delegate, as before chains were recorded. maxDepth of zero or
// less is model.DefaultMaxDelegationDepth.
//
// The verdict's detail carries the chain as people read it (path, the
// task's own hop last), the depth, the bound and the parent task, so the
// refusal is kept with its evidence.
//
// Failing codes: delegation_cycle, delegation_too_deep, both leading to
// rejected.
func Delegation(t model.Task, maxDepth int) model.Verdict {
	if maxDepth <= 0 {
		maxDepth = model.DefaultMaxDelegationDepth
	}
	if len(t.Chain) == 0 {
		return model.Verdict{Gate: model.GateDelegation, Passed: true, Message: "top-level task (submitted outside any task)"}
	}
	detail := map[string]string{"path": t.Path(), "depth": strconv.Itoa(t.Depth()),
		"max_depth": strconv.Itoa(maxDepth), "parent_task_id": t.ParentTaskID}
	seen := map[string]string{t.Caller: "caller of this task"}
	for _, h := range t.Chain {
		for _, who := range []struct{ name, role string }{{h.Caller, "caller"}, {h.Target, "target"}} {
			if _, dup := seen[who.name]; !dup {
				seen[who.name] = who.role + " of " + h.TaskID
			}
		}
	}
	if where, loop := seen[t.Target]; loop {
		detail["agent"] = t.Target
		return fail(model.GateDelegation, model.CodeDelegationCycle,
			"the target "+strconv.Quote(t.Target)+" is already in this task's delegation chain ("+where+"): "+t.Path(), detail)
	}
	if t.Depth() > maxDepth {
		return fail(model.GateDelegation, model.CodeDelegationTooDeep,
			"the delegation chain would be "+strconv.Itoa(t.Depth())+" deep, over limits.max_delegation_depth "+
				strconv.Itoa(maxDepth)+": "+t.Path(), detail)
	}
	return model.Verdict{Gate: model.GateDelegation, Passed: true,
		Message: "delegated inside " + t.ParentTaskID + ", depth " + strconv.Itoa(t.Depth()) + " of at most " +
			strconv.Itoa(maxDepth) + ": " + t.Path(), Detail: detail}
}

// ACPDenial is the acpDenial gate. It decides more than its name says:
// besides the ACP denial (the dispatcher's deny-all promise), whether the
// target agent can run at all. The checks run in this order, and the
// first failure decides:
//
//  1. policy: the dispatcher denies every permission request and advertises
//     neither fs nor terminal capabilities, else acp_denial_not_enforced.
//     It comes first because it is a relay defect that blocks every task,
//     whatever its target.
//  2. known: an agent the registry does not know has no adapter to run,
//     so agent_not_configured (an unknown agent's zero AgentInfo would
//     otherwise read as disabled).
//  3. enabled: a disabled target, agent_disabled. Policy is checked before
//     installation, so a disabled agent reads as disabled whether or not its
//     binary is present.
//  4. configured: the target's adapter binary was found, else
//     agent_not_configured.
//  5. verified: when the target has require_verified, its hardening
//     signal must be current (its last verification passed, within
//     verified_within, on the adapter version installed now — computed by
//     the registry), else agent_not_verified, with what to run.
//
// All its failures lead to blocked.
//
// A passing verdict describes the profile's rule for the task's mode, the
// one the run will be held by, never another mode's.
func ACPDenial(p model.DispatchPolicy, a model.AgentInfo, known bool, mode model.Mode) model.Verdict {
	if !p.DeniesAllPermissions || p.AdvertisesFS || p.AdvertisesTerminal {
		return fail(model.GateACPDenial, model.CodeACPDenialNotEnforced,
			"the dispatcher would not deny every permission request or would advertise fs/terminal",
			map[string]string{
				"denies_all_permissions": strconv.FormatBool(p.DeniesAllPermissions),
				"advertises_fs":          strconv.FormatBool(p.AdvertisesFS),
				"advertises_terminal":    strconv.FormatBool(p.AdvertisesTerminal),
			})
	}
	if !known {
		return fail(model.GateACPDenial, model.CodeAgentNotConfigured,
			"the target agent is not known to the registry", map[string]string{"agent": a.Name})
	}
	if !a.Enabled {
		return fail(model.GateACPDenial, model.CodeAgentDisabled,
			"the target agent "+strconv.Quote(a.Name)+" is disabled",
			map[string]string{"agent": a.Name, "reason": a.EnabledReason})
	}
	if !a.Configured {
		return fail(model.GateACPDenial, model.CodeAgentNotConfigured,
			"the target agent "+strconv.Quote(a.Name)+" has no adapter binary configured",
			map[string]string{"agent": a.Name, "reason": a.ConfiguredReason})
	}
	if h := a.Hardening; h.RequireVerified && !h.Current {
		return fail(model.GateACPDenial, model.CodeAgentNotVerified,
			"the target agent "+strconv.Quote(a.Name)+" requires a verified hardening (require_verified = true), but "+
				h.CurrentReason+"; run `relay agents verify "+a.Name+"`",
			map[string]string{"agent": a.Name, "hardening": string(h.Status), "reason": h.CurrentReason,
				"adapter_version": h.AdapterVersion, "installed_version": h.InstalledVersion, "verified_within": h.VerifiedWithin})
	}
	detail := map[string]string{"agent": a.Name, "profile": a.Profile.Name}
	if a.Profile.Name == "" {
		detail["profile"] = "none"
	} else {
		detail["verified_on"] = strings.Join(a.Profile.VerifiedOn, ", ")
		for m, what := range a.Profile.Modes {
			detail["profile_"+string(m)] = what
		}
	}
	msg := "permissions denied, no fs/terminal, target enabled and configured"
	if a.Hardening.RequireVerified {
		msg += ", hardening verified (" + a.Hardening.CurrentReason + ")"
		detail["hardening"] = string(a.Hardening.Status)
	}
	if mode == "" {
		mode = model.ModeReadOnly
	}
	switch rule, ok := a.Profile.Modes[mode]; {
	case a.Profile.Name != "" && ok:
		msg += "; hardening profile " + a.Profile.Name + " for " + string(mode) + " tasks: " + rule
	case a.Profile.Summary != "":
		msg += "; " + a.Profile.Summary
	}
	return model.Verdict{Gate: model.GateACPDenial, Passed: true, Message: msg, Detail: detail}
}

// GuardedClaude is the guardedClaude gate: a read_only task always passes; a
// state_changing task passes only when its target is exactly "claude" and
// the authority's answer carries assurance guarded.
//
// An empty mode is the documented default, read_only. Any other mode value
// is treated as state_changing (fail-closed), since only read_only is known
// to change nothing.
//
// Failing code: state_changing_requires_guarded_claude, leading to rejected.
func GuardedClaude(t model.Task, ans model.AuthorityAnswer) model.Verdict {
	if t.Mode == model.ModeReadOnly || t.Mode == "" {
		return model.Verdict{Gate: model.GateGuardedClaude, Passed: true, Message: "read_only task"}
	}
	if t.Target == ClaudeAgent && ans.Assurance == model.AssuranceGuarded {
		return model.Verdict{Gate: model.GateGuardedClaude, Passed: true,
			Message: "state_changing task on claude under guarded assurance"}
	}
	assurance := string(ans.Assurance)
	if assurance == "" {
		assurance = string(model.AssuranceStandard)
	}
	return fail(model.GateGuardedClaude, model.CodeStateChangingRequiresGuardedClaude,
		"state_changing tasks run only on claude with the authority's guarded assurance (target "+
			strconv.Quote(t.Target)+", assurance "+assurance+")",
		map[string]string{"mode": string(t.Mode), "target": t.Target, "assurance": assurance})
}

// Outcome returns the terminal state a failing verdict leads to, from the
// code catalogue (spec.Lookup): rejected for policy refusals, blocked when
// something could not be consulted or used. A passing verdict has no
// outcome and returns "". A failing verdict whose code is unknown, or whose
// catalogue state is neither rejected nor blocked, returns blocked: a gate
// that cannot be understood fails closed.
func Outcome(v model.Verdict) model.State {
	if v.Passed {
		return ""
	}
	if ci, ok := spec.Lookup(v.Code); ok && ci.Kind == spec.KindTask {
		switch ci.State {
		case model.StateRejected, model.StateBlocked:
			return ci.State
		}
	}
	return model.StateBlocked
}

func fail(g model.Gate, c model.Code, msg string, detail map[string]string) model.Verdict {
	return model.Verdict{Gate: g, Passed: false, Code: c, Message: msg, Detail: detail}
}
