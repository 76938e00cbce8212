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
// then acts, and the verification shows it.
func TestVerifyDetectsAnUnhardenedAgent(t *testing.T) {
	t.Parallel()
	e := newVerifyEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"asks"} })
	v := e.verify(t, "asks")
	if v.Status != model.HardeningFailed || !strings.Contains(v.Reason, dispatch.UnhardenedEnv) {
		t.Errorf("status %s (%s), want failed naming %s", v.Status, v.Reason, dispatch.UnhardenedEnv)
	}
	for name, stop := range stops(v) {
		if stop != model.StopNotStopped {
			t.Errorf("%s: %s, want not stopped", name, stop)
		}
	}
}
