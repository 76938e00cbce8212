package dispatch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

func TestDerivedPolicyHasTeeth(t *testing.T) {
	t.Parallel()
	if !deniesEveryPermission(decidePermission) {
		t.Fatal("the real decision fails its own check")
	}
	first := func(o []acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId) {
		if len(o) == 0 {
			return acp.NewRequestPermissionOutcomeCancelled(), ""
		}
		return acp.NewRequestPermissionOutcomeSelected(o[0].OptionId), o[0].OptionId
	}
	anyReject := func(o []acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId) {
		for _, x := range o {
			if x.Kind == acp.PermissionOptionKindRejectAlways || x.Kind == acp.PermissionOptionKindRejectOnce {
				return acp.NewRequestPermissionOutcomeSelected(x.OptionId), x.OptionId
			}
		}
		return acp.NewRequestPermissionOutcomeCancelled(), ""
	}
	alwaysCancel := func([]acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId) {
		return acp.NewRequestPermissionOutcomeCancelled(), ""
	}
	// The first reject_once, even when its id is also an allow option's.
	firstRejectOnce := func(o []acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId) {
		for _, x := range o {
			if x.Kind == acp.PermissionOptionKindRejectOnce {
				return acp.NewRequestPermissionOutcomeSelected(x.OptionId), x.OptionId
			}
		}
		return acp.NewRequestPermissionOutcomeCancelled(), ""
	}
	for name, f := range map[string]func([]acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId){
		"first option": first, "reject_always too": anyReject, "ignores reject_once": alwaysCancel,
		"blind to duplicate ids": firstRejectOnce,
	} {
		if deniesEveryPermission(f) {
			t.Errorf("%s: passed the deny-all check", name)
		}
	}
	if !refusesFS() || !refusesTerminal() {
		t.Fatal("fs/terminal handlers do not refuse")
	}
	// The capabilities on the wire come from the same constants.
	b, _ := json.Marshal(clientCapabilities())
	var caps acp.ClientCapabilities
	_ = json.Unmarshal(b, &caps)
	if caps.Fs.ReadTextFile || caps.Fs.WriteTextFile || caps.Terminal || caps.Auth.Terminal {
		t.Fatalf("capabilities on the wire: %s", b)
	}
}

// TestPermissionWithDuplicateOptionIDsIsCancelled: when an option id is
// not unique among a request's options, selecting it would be ambiguous
// (the agent may read the reject_once id as an allow option's), so the
// answer is cancelled, never a selection.
func TestPermissionWithDuplicateOptionIDsIsCancelled(t *testing.T) {
	t.Parallel()
	opt := func(kind acp.PermissionOptionKind, id string) acp.PermissionOption {
		return acp.PermissionOption{Kind: kind, Name: string(kind), OptionId: acp.PermissionOptionId(id)}
	}
	for name, opts := range map[string][]acp.PermissionOption{
		"reject_once id shared with allow_once":   {opt(acp.PermissionOptionKindAllowOnce, "x"), opt(acp.PermissionOptionKindRejectOnce, "x")},
		"reject_once id shared with allow_always": {opt(acp.PermissionOptionKindRejectOnce, "x"), opt(acp.PermissionOptionKindAllowAlways, "x")},
		"two reject_once with one id":             {opt(acp.PermissionOptionKindRejectOnce, "x"), opt(acp.PermissionOptionKindRejectOnce, "x")},
		"another id duplicated":                   {opt(acp.PermissionOptionKindRejectOnce, "no"), opt(acp.PermissionOptionKindAllowOnce, "a"), opt(acp.PermissionOptionKindAllowAlways, "a")},
	} {
		out, id := decidePermission(opts)
		if out.Cancelled == nil || out.Selected != nil || id != "" {
			t.Errorf("%s: outcome %+v (option %q), want cancelled", name, out, id)
		}
	}
	// Unique ids: the reject_once option is still selected.
	out, id := decidePermission([]acp.PermissionOption{opt(acp.PermissionOptionKindAllowOnce, "a"), opt(acp.PermissionOptionKindRejectOnce, "r")})
	if out.Selected == nil || out.Selected.OptionId != "r" || id != "r" {
		t.Errorf("unique ids: outcome %+v (option %q), want selected r", out, id)
	}
}

func TestClientKeepsNoThoughts(t *testing.T) {
	t.Parallel()
	c := newClient(nil)
	_ = c.SessionUpdate(t.Context(), acp.SessionNotification{Update: acp.UpdateAgentThoughtText("secret thought")})
	_ = c.SessionUpdate(t.Context(), acp.SessionNotification{Update: acp.UpdateAgentMessageText("visible")})
	_ = c.SessionUpdate(t.Context(), acp.SessionNotification{Update: acp.UpdatePlan(acp.PlanEntry{Content: "plan secret"})})
	res, _ := c.result()
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), "secret") || res.Text != "visible" {
		t.Fatalf("kept %s", b)
	}
}

// An agent's JSON-RPC error data is quoted in its own words, never as Go's
// map syntax (claude-agent-acp's reason lives in data.details).
func TestErrTextQuotesErrorDataWithoutGoSyntax(t *testing.T) {
	for _, c := range []struct {
		data any
		want string
	}{
		{map[string]any{"details": "Query closed before response received"}, "code -32603 Internal error: Query closed before response received"},
		{map[string]any{"error": "context deadline exceeded"}, "code -32603 Internal error: context deadline exceeded"},
		{map[string]any{"n": 1.0}, `code -32603 Internal error: {"n":1}`},
		{"plain \x1b[31mred\x1b[0m", "code -32603 Internal error: plain red"},
	} {
		err := &acp.RequestError{Code: -32603, Message: "Internal error", Data: c.data}
		if got := errText(err); got != c.want || strings.Contains(got, "map[") {
			t.Errorf("errText(%v) = %q, want %q", c.data, got, c.want)
		}
	}
}

// A leader killed by SIGTERM that the relay did not send is said to come
// from another process (the relay stops agents with SIGKILL), so that a
// task ended by someone's pkill is not taken for a relay bug.
func TestSignalDescriptionNamesWhoSentIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sig    syscall.Signal
		killed bool
		want   string
	}{
		{syscall.SIGKILL, true, "killed by the relay"},
		{syscall.SIGTERM, true, "killed by the relay"},
		{syscall.SIGKILL, false, "killed by signal killed"},
		{syscall.SIGSEGV, false, "killed by signal segmentation fault"},
		{syscall.SIGTERM, false, "killed by signal terminated, which the relay never sends an agent"},
	} {
		if got := signalDescription(c.sig, c.killed); !strings.HasPrefix(got, c.want) {
			t.Errorf("signalDescription(%v, %v) = %q, want %q…", c.sig, c.killed, got, c.want)
		}
	}
}

// Sessions that start at once write the same profile file; each write
// succeeds and the file ends whole (CI once failed a Gemini verification
// with "rename …toml.tmp …toml: no such file or directory").
func TestWritePrivateConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gemini-read-only.toml")
	contents := []string{"a = 1\n", "b = 2\n"}
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := writePrivate(path, contents[(g+i)%2]); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !slices.Contains(contents, string(b)) {
		t.Fatalf("file holds %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
