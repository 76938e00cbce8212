//go:build relaytest

package verify_test

import (
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// Without its profile the Hermes stand-in runs the verification's command
// without asking, and the verification says so.
func TestVerifyDetectsAnUnhardenedHermes(t *testing.T) {
	t.Parallel()
	e := newStandInEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"hermes"} })
	v := e.verify(t, "hermes")
	got := stops(v)
	if v.Status != model.HardeningFailed || got["read_only shell"] != model.StopNotStopped ||
		got["read_only write-inside"] != model.StopDeniedByRelay {
		t.Errorf("status %s (%s), stops %v: want failed, the command not stopped, the write asked and denied", v.Status, v.Reason, got)
	}
}
