// Package gates holds the guards of the authorize transition (submitted →
// authorized; the gate table is spec.Gates) and the client of the
// external authority adapter.
//
// Each guard is a named function returning a model.Verdict, so verdicts,
// errors and the lifecycle graph all show the same names. Evaluate runs
// them in the table's order as an ordinary pipeline, before the machine fires anything, and stops at the
// first failing one, which decides the outcome; the machine's guards of the
// same names only read the Verdicts it returned:
//
//   - MissionLease checks the shape of the mission and lease IDs;
//   - Delegation refuses a task submitted inside another task whose
//     target is already in its delegation chain, or whose chain is too
//     deep;
//   - ACPDenial checks the dispatcher's deny-all promise, then whether
//     the target agent can run at all: known to the registry, enabled,
//     its adapter binary found, and verified when it has require_verified;
//   - Authority consults the authority adapter, once per evaluation, only
//     after the cheaper gates passed;
//   - GuardedClaude lets state_changing tasks through only for claude under
//     the authority's guarded assurance.
//
// MissionLease, ACPDenial and GuardedClaude are pure: no clock, no I/O, no
// allocation when they pass; Delegation is pure too (it allocates the
// chain's description). Authority does exactly one Consult and nothing
// else. None of them sets Verdict.At: Evaluate stamps verdicts with its
// caller's clock. Outcome maps a failing verdict to the terminal
// state it leads to (rejected or blocked), fail-closed.
//
// NewAuthority returns the subprocess client of the authority adapter (its
// wire types are in spec/authority.go): argv run without a shell in its
// own process group, one JSON request on stdin, one JSON answer of at most
// 64 KiB on stdout, bounded by a timeout after which the whole process
// group is killed.
package gates
