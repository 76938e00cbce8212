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
