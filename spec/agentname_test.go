package spec_test

import (
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

func TestValidAgentName(t *testing.T) {
	t.Parallel()
	for _, name := range append(model.CoreAgents(), "a", "0", "my-agent_2", strings.Repeat("x", 64)) {
		if !spec.ValidAgentName(name) {
			t.Errorf("ValidAgentName(%q) = false", name)
		}
	}
	for _, name := range []string{"", "relay", "Claude", "-a", "_a", "a b", "a.b", "é", strings.Repeat("x", 65)} {
		if spec.ValidAgentName(name) {
			t.Errorf("ValidAgentName(%q) = true", name)
		}
	}
}
