package hardening_test

import (
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch/hardening"
)

// A session and the agent listing pick one profile the same way: the one
// covering the adapter found on disk, a refusal naming it when none does,
// and for an adapter not identified there the current generation's, as a
// guess; a profile covering any adapter is preferred to that guess.
func TestPick(t *testing.T) {
	t.Parallel()
	claude := hardening.ProfilesFor("claude")
	if len(claude) < 2 {
		t.Fatalf("claude has %d profiles, want both generations", len(claude))
	}
	c, guessed := hardening.Pick("claude", claude, "@zed-industries/claude-agent-acp", "0.23.1")
	if c.Profile == nil || guessed || !c.Profile.Covers("@zed-industries/claude-agent-acp", "0.23.1") {
		t.Errorf("covered adapter: %+v, guessed %v", c, guessed)
	}
	c, guessed = hardening.Pick("claude", claude, "@zed-industries/claude-agent-acp", "0.49.0")
	if c.Profile != nil || guessed || !strings.Contains(c.Refused, "0.49.0") {
		t.Errorf("uncovered adapter: %+v, guessed %v; want refused naming the version", c, guessed)
	}
	c, guessed = hardening.Pick("claude", claude, "", "")
	if c.Profile != claude[0] || !guessed {
		t.Errorf("unidentified adapter: %+v, guessed %v; want the current generation's profile, as a guess", c, guessed)
	}
	anyAdapter := &hardening.Profile{Name: "any"}
	c, guessed = hardening.Pick("claude", append(claude, anyAdapter), "", "")
	if c.Profile != anyAdapter || !guessed {
		t.Errorf("unidentified adapter with a profile for any: %+v, guessed %v", c, guessed)
	}
	if c, guessed := hardening.Pick("mine", nil, "x", "1"); c.Profile != nil || c.Refused != "" || guessed {
		t.Errorf("no profiles: %+v, guessed %v", c, guessed)
	}
}
