// Package hardening holds what the relay does per agent adapter, as data,
// and the plan of the sandbox an agent runs in.
//
// The hardening profiles (Profile, one per adapter generation, with a
// Rule per task mode) are the first layer of a task's read_only promise:
// what session/new carries, what the agent's environment and argv get,
// which session mode or config option is held. ProfilesFor gives an
// agent's profiles; Choose picks the one for the adapter installed.
// Masks hide paths an agent would load code or rules from. VerifySpec is
// a profile's side of an offline verification (package dispatch/verify).
//
// PlanLaunch turns a rule's sandbox fields, the task and the agent's argv
// and environment into what to launch (package sandbox's Plan, its
// command line, the agent's environment, the directories to make and the
// files to copy into its own home). It reads the filesystem and writes
// nothing: package dispatch makes what the plan names and starts it.
//
// What stays in package dispatch, because it is the session's: the mode
// state a session checks against a rule (modeState, unsafeState), writing
// a rule's Files and the session's own directory (Rule.OwnDir), and
// executing the launch plan.
//
// Files: profile.go (Profile, Rule, Choose, describing profiles),
// profiles.go and profiles_cursor_hermes.go (the profiles), mask.go (the
// masks), launch.go (PlanLaunch), versionrange.go, verifyspec.go.
package hardening
