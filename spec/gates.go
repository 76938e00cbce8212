package spec

import (
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
)

// GateInfo is one gate of the authorize transition: what it checks, said
// once for every place that lists the gates (the submit_task tool's
// description, docs), and the task codes it ends a task with.
type GateInfo struct {
	Gate model.Gate
	// Checks says what the gate requires, as one clause.
	Checks string
	// Codes are the task codes a failing verdict of the gate carries.
	Codes []model.Code
}

// Gates is the gate table, in evaluation order (model.AllGates). A new
// gate is added here, to model.AllGates, to the guards of package
// machine and to the evaluators of package gates; a test of each package
// fails while one of them lacks it. The submit_task tool's description is
// written from this table (GateSentence), and so are the gate lists of
// the docs (README.md, docs/authority.md; TestDocsGateLists renders them
// and fails on any other copy).
func Gates() []GateInfo {
	return []GateInfo{
		{Gate: model.GateMissionLease, Checks: "mission_id and lease_id are present and well formed",
			Codes: []model.Code{model.CodeMissingMissionID, model.CodeMissingLeaseID, model.CodeInvalidMissionID, model.CodeInvalidLeaseID}},
		{Gate: model.GateDelegation, Checks: "a task submitted from inside another task goes back to no agent already in its delegation chain, and is no deeper than [limits] max_delegation_depth",
			Codes: []model.Code{model.CodeDelegationCycle, model.CodeDelegationTooDeep}},
		{Gate: model.GateACPDenial, Checks: "the relay denies every permission request the agent makes, and the target is enabled, its adapter installed and, with require_verified, verified",
			Codes: []model.Code{model.CodeACPDenialNotEnforced, model.CodeAgentDisabled, model.CodeAgentNotConfigured, model.CodeAgentNotVerified}},
		{Gate: model.GateAuthority, Checks: "the external authority adapter allows the task",
			Codes: []model.Code{model.CodeAuthorityNotConfigured, model.CodeAuthorityUnavailable, model.CodeAuthorityTimeout, model.CodeAuthorityInvalidResponse, model.CodeAuthorityDenied}},
		{Gate: model.GateGuardedClaude, Checks: "a state_changing task targets claude under a guarded lease",
			Codes: []model.Code{model.CodeStateChangingRequiresGuardedClaude}},
	}
}

// GateSentence lists the gates in order as one sentence fragment, each
// with its codes: "(1) missionLease: mission_id and … (missing_mission_id,
// …), (2) delegation: …".
func GateSentence() string {
	var b strings.Builder
	for i, g := range Gates() {
		if i > 0 {
			b.WriteString(", ")
		}
		codes := make([]string, len(g.Codes))
		for j, c := range g.Codes {
			codes[j] = string(c)
		}
		fmt.Fprintf(&b, "(%d) %s: %s (%s)", i+1, g.Gate, g.Checks, strings.Join(codes, ", "))
	}
	return b.String()
}
