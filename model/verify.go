package model

import (
	"strings"
	"time"
)

// HardeningStatus is the outcome of an agent's last hardening
// verification (relay agents verify NAME), shown as the agent's hardening
// health signal beside configured, enabled and worked_live.
type HardeningStatus string

// The hardening statuses.
const (
	// HardeningVerified: every scripted attempt to write, edit or run was
	// stopped.
	HardeningVerified HardeningStatus = "verified"
	// HardeningFailed: an attempt was not stopped, or could not be made
	// (the verification was inconclusive).
	HardeningFailed HardeningStatus = "failed"
	// HardeningUnusable: every attempt was stopped, but a positive control
	// (read a file in the cwd and answer with a token from it) did not
	// pass: the agent is safe but cannot do a task's work (a refused
	// mode, a sandbox that cannot start, a missing tool). Never verified.
	HardeningUnusable HardeningStatus = "unusable"
	// HardeningUnverified: never verified, or the verification could not
	// run on this machine without touching the user's settings, or the
	// agent has no hardening profile.
	HardeningUnverified HardeningStatus = "unverified"
)

// AllHardeningStatuses lists every HardeningStatus.
func AllHardeningStatuses() []HardeningStatus {
	return []HardeningStatus{HardeningVerified, HardeningFailed, HardeningUnusable, HardeningUnverified}
}

// Stop is what stopped one scripted attempt of a verification.
type Stop string

// The stops, in the order a verification classifies them.
const (
	// StopNotStopped: the file was written or changed, or the command ran.
	// It fails the verification.
	StopNotStopped Stop = "not_stopped"
	// StopModeRefused: the session was refused before the prompt, or
	// stopped during the run, with agent_unsafe_mode.
	StopModeRefused Stop = "mode_refused"
	// StopDeniedByRelay: the agent asked permission and the relay denied
	// it.
	StopDeniedByRelay Stop = "denied_by_relay"
	// StopToolNotOffered: the agent did not offer the model the tool the
	// attempt calls.
	StopToolNotOffered Stop = "tool_not_offered"
	// StopRefusedByAgent: the tool was offered and called, no permission
	// was asked, and nothing happened: the agent (its sandbox, its
	// permission rules) refused it.
	StopRefusedByAgent Stop = "refused_by_agent"
	// StopSandbox: the tool was called and ran, no permission was asked,
	// and the relay's sandbox stopped its effect (a read-only file system,
	// a write Landlock denied): the layer that does not depend on the
	// agent held.
	StopSandbox Stop = "sandbox"
	// StopNotRun: the attempt could not be made (the agent could not be
	// started, needed a login, or did not reach the model in time). It
	// makes the verification inconclusive, so failed.
	StopNotRun Stop = "not_run"
)

// AllStops lists every Stop.
func AllStops() []Stop {
	return []Stop{StopNotStopped, StopModeRefused, StopDeniedByRelay, StopToolNotOffered, StopRefusedByAgent, StopSandbox, StopNotRun}
}

// Stopped reports whether the attempt was stopped (the verification may
// pass).
func (s Stop) Stopped() bool {
	switch s {
	case StopModeRefused, StopDeniedByRelay, StopToolNotOffered, StopRefusedByAgent, StopSandbox:
		return true
	}
	return false
}

// Describe is the stop as a report says it.
func (s Stop) Describe() string {
	switch s {
	case StopNotStopped:
		return "NOT STOPPED"
	case StopModeRefused:
		return "mode refused (agent_unsafe_mode)"
	case StopDeniedByRelay:
		return "permission request denied by the relay"
	case StopToolNotOffered:
		return "tool not offered"
	case StopRefusedByAgent:
		return "tool refused by the agent"
	case StopNotRun:
		return "not run"
	}
	return string(s)
}

// VerifyAttempt is one scripted attempt of a verification and what it
// met.
type VerifyAttempt struct {
	// Name names the attempt: write-outside, write-inside, edit-inside,
	// shell.
	Name string `json:"name"`
	// Mode is the task mode the attempt's session ran in.
	Mode Mode `json:"mode"`
	// Tool is the agent tool the scripted model calls.
	Tool string `json:"tool"`
	// Target is the file the attempt must not create or change.
	Target string `json:"target"`
	// StoppedBy is what stopped it; "" for a positive control.
	StoppedBy Stop `json:"stopped_by"`
	// Control marks a positive control: the agent must read a file in
	// its cwd and answer with a token from it, and the session must
	// complete; Passed says whether it did.
	Control bool `json:"control,omitempty"`
	Passed  bool `json:"passed,omitempty"`
	// Detail is the evidence: the tool result the agent returned, the
	// mode seen, what was found on disk, or why the attempt was not run.
	Detail string `json:"detail"`
}

// Verification is the outcome of one hardening verification of an agent:
// its adapter, with the user's own settings, under its hardening profile
// and the relay's deny-all policy, driven by a scripted model on loopback
// through attempts to write, edit and run.
type Verification struct {
	Agent  string          `json:"agent"`
	Status HardeningStatus `json:"status"`
	At     time.Time       `json:"at"`
	// AdapterVersion is the version the adapter reported at initialize
	// ("" when no session got that far).
	AdapterVersion string `json:"adapter_version"`
	// Profile names the hardening profile verified ("" without one).
	Profile string `json:"profile"`
	// AdapterPackage, AdapterPath and Fingerprint identify the adapter
	// the verification ran (see AgentAdapter): require_verified holds
	// only while the installed adapter has this fingerprint.
	AdapterPackage string `json:"adapter_package,omitempty"`
	AdapterPath    string `json:"adapter_path,omitempty"`
	Fingerprint    string `json:"fingerprint,omitempty"`
	// Reason says in one line why the status is what it is.
	Reason   string          `json:"reason"`
	Attempts []VerifyAttempt `json:"attempts"`
}

// AgentHardening is an agent's hardening health signal: its last
// verification, and whether that verification still holds for the
// require_verified policy.
type AgentHardening struct {
	Status HardeningStatus `json:"status"`
	// At is when the last verification ran (nil: never).
	At *time.Time `json:"at"`
	// AdapterVersion is the adapter version the last verification saw.
	AdapterVersion string `json:"adapter_version"`
	Reason         string `json:"reason"`
	// InstalledVersion is the adapter version installed now, as the relay
	// finds it ("" when it cannot tell).
	InstalledVersion string `json:"installed_version"`
	// Fingerprint is the fingerprint of the adapter the last verification
	// ran, InstalledFingerprint that of the one installed now.
	Fingerprint          string `json:"fingerprint,omitempty"`
	InstalledFingerprint string `json:"installed_fingerprint,omitempty"`
	// RequireVerified is the agent's require_verified policy: tasks are
	// blocked (agent_not_verified) unless Current.
	RequireVerified bool `json:"require_verified"`
	// VerifiedWithin is how old a passed verification may be for
	// require_verified (a Go duration, as ShortDuration writes it).
	VerifiedWithin string `json:"verified_within"`
	// Current reports whether the last verification passed, within
	// VerifiedWithin, on the very adapter installed now (same
	// fingerprint).
	Current bool `json:"current"`
	// CurrentReason says why Current is what it is.
	CurrentReason string `json:"current_reason"`
}

// ShortDuration writes d as a Go duration without trailing zero units
// ("720h", "30m", "90s"), as the relay shows durations to users.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
