package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		agent      string
		timeout    time.Duration
		ok         bool
		code       model.Code
		reasonHead string
	}{
		{"fake", 20 * time.Second, true, "", ""},
		{"modes", 20 * time.Second, true, "", ""},
		{"missing", 20 * time.Second, false, model.CodeDispatchFailed, "spawn:"},
		{"hang", 500 * time.Millisecond, false, model.CodeDispatchFailed, "timeout:"},
		{"hanginit", 500 * time.Millisecond, false, model.CodeDispatchFailed, "timeout:"},
		{"auth", 20 * time.Second, false, model.CodeAgentAuthRequired, "auth required:"},
		{"codex", 20 * time.Second, false, model.CodeAgentAuthRequired, "auth required:"},
		{"v2", 20 * time.Second, false, model.CodeDispatchFailed, "initialize:"},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			info, err := e.d.Probe(context.Background(), c.agent, c.timeout)
			if info.Name != c.agent {
				t.Fatalf("info = %+v", info)
			}
			e.probesMu.Lock()
			p, recorded := e.probes[c.agent]
			e.probesMu.Unlock()
			if !recorded || p.OK != c.ok {
				t.Fatalf("OnProbe: %v %+v", recorded, p)
			}
			if info.WorkedLive != c.ok || info.WorkedLiveAt == nil {
				t.Fatalf("worked_live = %v at %v (%s)", info.WorkedLive, info.WorkedLiveAt, info.WorkedLiveReason)
			}
			if c.ok {
				if err != nil {
					t.Fatalf("probe: %v", err)
				}
				if len(e.events(t, "prompt")) != 1 || e.events(t, "prompt")[0]["text"] != "Reply with the single word OK." {
					t.Fatalf("probe prompt: %v", e.events(t, "prompt"))
				}
				return
			}
			if model.ErrorCode(err) != c.code {
				t.Fatalf("err = %v, want %s", err, c.code)
			}
			if !strings.HasPrefix(p.Reason, c.reasonHead) || info.WorkedLiveReason != p.Reason {
				t.Fatalf("reason %q (entry %q), want it to start with %q", p.Reason, info.WorkedLiveReason, c.reasonHead)
			}
			if !strings.Contains(model.Public(err).Message, c.reasonHead) {
				t.Fatalf("error message %q does not name the stage", model.Public(err).Message)
			}
		})
	}
}

func TestProbeUnknownAndCanceled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.d.Probe(context.Background(), "nobody", time.Second); model.ErrorCode(err) != model.CodeUnknownAgent {
		t.Fatalf("unknown: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := e.d.Probe(ctx, "hang", time.Minute); err == nil {
		t.Fatal("canceled probe: no error")
	}
	e.probesMu.Lock()
	defer e.probesMu.Unlock()
	if len(e.probes) != 0 {
		t.Fatalf("a canceled probe was recorded: %v", e.probes)
	}
}
