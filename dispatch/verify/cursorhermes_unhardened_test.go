//go:build relaytest

package verify_test

import (
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// Without its profile the Hermes stand-in runs the verification's command
// without asking, and the verification says which layer stopped it: the
// relay's sandbox (the write still asks, and the relay denies it).
func TestVerifyDetectsAnUnhardenedHermes(t *testing.T) {
	t.Parallel()
	e := newStandInEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"hermes"} })
	v := e.verify(t, "hermes")
	got := stops(v)
	if v.Status != model.HardeningVerified || got["read_only shell"] != model.StopSandbox ||
		got["read_only write-inside"] != model.StopDeniedByRelay {
		t.Errorf("status %s (%s), stops %v: want verified, the command stopped by the sandbox, the write asked and denied", v.Status, v.Reason, got)
	}
}
