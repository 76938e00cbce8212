package machine_test

import (
	"context"
	"testing"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

// A recipient is one agent name, exactly: padding around a name is a
// malformed argument (invalid_args), not a list of agents
// (broadcast_not_supported), and nothing is stored.
func TestSendMessageRecipientShape(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	svc := machine.NewService(machine.ServiceOptions{Engine: r.eng, Store: r.db, Messages: r.db, Registry: healthyRegistry()})
	ctx := context.Background()
	for _, tc := range []struct {
		to   string
		code model.Code
	}{
		{" codex", model.CodeInvalidArgs},
		{"codex ", model.CodeInvalidArgs},
		{"\tcodex\n", model.CodeInvalidArgs},
		{"codex,claude", model.CodeBroadcastNotSupported},
		{"codex claude", model.CodeBroadcastNotSupported},
		{"*", model.CodeBroadcastNotSupported},
		{"all", model.CodeBroadcastNotSupported},
	} {
		_, err := svc.SendMessage(ctx, "gemini", model.SendRequest{To: tc.to, Body: "hi"})
		if got := model.ErrorCode(err); got != tc.code {
			t.Errorf("to %q: %q (%v), want %q", tc.to, got, err, tc.code)
		}
	}
	if ms, err := r.db.ListMessages(ctx, model.MessageFilter{}); err != nil || len(ms) != 0 {
		t.Fatalf("%d messages stored by refused sends (%v)", len(ms), err)
	}
	if _, err := svc.SendMessage(ctx, "gemini", model.SendRequest{To: "codex", Body: "hi"}); err != nil {
		t.Fatalf("a plain name: %v", err)
	}
}

// The relay's ids are what model.ValidTaskID and model.ValidMessageID
// accept, so a lookup or reference that fails them names nothing the
// relay made; near misses are refused.
func TestRelayIDShape(t *testing.T) {
	t.Parallel()
	for range 100 {
		if id := machine.NewID(model.TaskIDPrefix); !model.ValidTaskID(id) || model.ValidMessageID(id) {
			t.Fatalf("task id %q: ValidTaskID=%v ValidMessageID=%v", id, model.ValidTaskID(id), model.ValidMessageID(id))
		}
		if id := machine.NewID(model.MessageIDPrefix); !model.ValidMessageID(id) || model.ValidTaskID(id) {
			t.Fatalf("message id %q: ValidMessageID=%v ValidTaskID=%v", id, model.ValidMessageID(id), model.ValidTaskID(id))
		}
	}
	good := machine.NewID(model.TaskIDPrefix)
	for _, bad := range []string{"", "T-1", "T-nope", good + "0", good[:len(good)-1], "t" + good[1:],
		good[:5] + "i" + good[6:], good[:5] + "U" + good[6:], "T_" + good[2:], "T-" + good[2:len(good)-1] + "\n"} {
		if model.ValidTaskID(bad) {
			t.Errorf("ValidTaskID(%q) = true", bad)
		}
	}
}
