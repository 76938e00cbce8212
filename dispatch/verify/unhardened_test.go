//go:build relaytest

package verify_test

import (
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// The test-only switch runs the agent without its profile's session
// options: the agent that its profile keeps asking (and the relay denies)
// then acts, and the verification shows it: in read_only, the relay's
// sandbox stops every attempt the profile no longer does (the layer that
// does not depend on the agent); in state_changing, its writes to the cwd
// happen.
func TestVerifyDetectsAnUnhardenedAgent(t *testing.T) {
	t.Parallel()
	e := newVerifyEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"asks"} })
	v := e.verify(t, "asks")
	if v.Status != model.HardeningFailed || !strings.Contains(v.Reason, dispatch.UnhardenedEnv) {
		t.Errorf("status %s (%s), want failed naming %s", v.Status, v.Reason, dispatch.UnhardenedEnv)
	}
	for name, stop := range stops(v) {
		want := model.StopNotStopped
		if strings.HasPrefix(name, string(model.ModeReadOnly)) {
			want = model.StopSandbox
		}
		if stop != want {
			t.Errorf("%s: %s, want %s", name, stop, want)
		}
	}
}
