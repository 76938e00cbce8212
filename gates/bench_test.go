package gates_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
)

// BenchmarkGates evaluates the three pure gates (missionLease, acpDenial,
// guardedClaude) as one authorization does, without the adapter.
func BenchmarkGates(b *testing.B) {
	policy := model.DispatchPolicy{DeniesAllPermissions: true}
	agent := model.AgentInfo{Name: "claude", Enabled: true, Configured: true}
	ans := model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceGuarded}
	long := strings.Repeat("M-0123456789.", 10)[:128]
	cases := []struct {
		name string
		task model.Task
		pass bool
	}{
		{"pass", model.Task{MissionID: "M-2026-0001", LeaseID: "S-abc.def:1", Target: "claude", Mode: model.ModeStateChanging}, true},
		{"pass-128", model.Task{MissionID: long, LeaseID: long, Target: "claude", Mode: model.ModeStateChanging}, true},
		{"reject", model.Task{MissionID: "M-2026-0001", LeaseID: "S abc", Target: "claude"}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := gates.MissionLease(c.task)
				if v.Passed {
					v = gates.ACPDenial(policy, agent, true, model.ModeReadOnly)
				}
				if v.Passed {
					v = gates.GuardedClaude(c.task, ans)
				}
				if v.Passed != c.pass {
					b.Fatalf("verdict %+v", v)
				}
			}
		})
	}
}

// BenchmarkAuthorityRoundTrip consults the fake adapter (a real subprocess)
// and reports the latency distribution.
func BenchmarkAuthorityRoundTrip(b *testing.B) {
	bin := gatesBuild(b)
	auth := gates.NewAuthority([]string{bin, "allow-guarded"}, 10*time.Second)
	req := model.AuthorityRequest{TaskID: "T-1", MissionID: "M-1", LeaseID: "S-1",
		Caller: "codex", Target: "claude", Mode: model.ModeReadOnly}
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		v, _ := gates.Authority(ctx, auth, req)
		lat = append(lat, time.Since(start))
		if !v.Passed {
			b.Fatalf("verdict %+v", v)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
