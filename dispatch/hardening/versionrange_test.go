package hardening_test

import (
	"testing"

	"github.com/hai-relay/relay/dispatch/hardening"
)

// VersionRange keeps the behaviour the hardening profiles rely on, edges
// included: a pre-release or build suffix is ignored (0.24.0-beta is the
// next generation, 0.23.2-rc.1 this one), Cursor's date versions with
// leading zeros parse, and anything that is not a version is in no range.
func TestVersionRangeContains(t *testing.T) {
	t.Parallel()
	claude := hardening.VersionRange{From: "0.23.0", Below: "0.24.0"}
	codex := hardening.VersionRange{From: "2.0.0", Below: "3.0.0"}
	gemini := hardening.VersionRange{From: "0.61.0", Below: "1.0.0"}
	cursor := hardening.VersionRange{From: "2025.1.0"}
	for _, c := range []struct {
		r    hardening.VersionRange
		v    string
		want bool
	}{
		{claude, "0.23.0", true},
		{claude, "0.23.1", true},
		{claude, "v0.23.1", true},
		{claude, " 0.23.1 ", true},
		{claude, "0.23.2-rc.1", true},
		{claude, "0.23.1+build.5", true},
		{claude, "0.23", true},
		{claude, "0.22.9", false},
		{claude, "0.24.0", false},
		{claude, "0.24.0-beta", false},
		{claude, "1.0.0", false},
		{claude, "", false},
		{claude, "latest", false},
		{claude, "0.23.x", false},
		{codex, "2.6.0", true},
		{codex, "2", true},
		{codex, "3.0.0-alpha.1", false},
		{codex, "1.9.9", false},
		{gemini, "0.61.0", true},
		{gemini, "0.99.99", true},
		{gemini, "0.60.9", false},
		{gemini, "1.0.0", false},
		{cursor, "2025.08.25-896bbe1", true},
		{cursor, "2026.10.22-27dcf5f", true},
		{cursor, "2025.1.0", true},
		{cursor, "2024.12.31", false},
		{cursor, "0.7.1", false},
	} {
		if got := c.r.Contains(c.v); got != c.want {
			t.Errorf("%+v.Contains(%q) = %v, want %v", c.r, c.v, got, c.want)
		}
	}
}

// A range reads as users write it.
func TestVersionRangeString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    hardening.VersionRange
		want string
	}{
		{hardening.VersionRange{From: "0.23.0", Below: "0.24.0"}, "0.23.x"},
		{hardening.VersionRange{From: "0.101.0", Below: "0.102.0"}, "0.101.x"},
		{hardening.VersionRange{From: "2.0.0", Below: "3.0.0"}, "2.x"},
		{hardening.VersionRange{From: "1.18.0", Below: "2.0.0"}, ">= 1.18.0, < 2.0.0"},
		{hardening.VersionRange{From: "0.61.0", Below: "1.0.0"}, ">= 0.61.0, < 1.0.0"},
		{hardening.VersionRange{From: "2025.1.0"}, ">= 2025.1.0"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.r, got, c.want)
		}
	}
}

// Every profile's range is one semver reads: its lower bound is in it,
// its upper bound is not.
func TestProfileRangesParse(t *testing.T) {
	t.Parallel()
	for _, agent := range []string{"claude", "codex", "gemini", "opencode", "cursor", "hermes"} {
		ps := hardening.ProfilesFor(agent)
		if len(ps) == 0 {
			t.Errorf("%s: no profile", agent)
		}
		for _, p := range ps {
			r := p.Versions
			if !r.Contains(r.From) || (r.Below != "" && r.Contains(r.Below)) {
				t.Errorf("%s: range %+v does not hold its bounds", p.Name, r)
			}
		}
	}
}
