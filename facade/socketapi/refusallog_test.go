package socketapi

import (
	"testing"
	"time"
)

// The refusal log budget: a burst per agent, then one line per interval;
// a run of suppressed lines is announced once and counted when logging
// resumes; agents do not share a bucket.
func TestRefusalBudget(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	b := newRefusalBudget(3, time.Second, func() time.Time { return now })
	for i := range 3 {
		if ok, _, _ := b.take("codex"); !ok {
			t.Fatalf("refusal %d within the burst not logged", i)
		}
	}
	ok, _, first := b.take("codex")
	if ok || !first {
		t.Fatalf("4th refusal: ok=%v first=%v, want suppressed and announced", ok, first)
	}
	for range 5 {
		if ok, _, first := b.take("codex"); ok || first {
			t.Fatalf("later refusal: ok=%v first=%v, want suppressed silently", ok, first)
		}
	}
	if ok, _, _ := b.take("claude"); !ok {
		t.Fatal("another agent's refusal is suppressed by codex's")
	}
	now = now.Add(time.Second)
	ok, suppressed, _ := b.take("codex")
	if !ok || suppressed != 6 {
		t.Fatalf("after an interval: ok=%v suppressed=%d, want logged with 6 counted", ok, suppressed)
	}
	// Names beyond the bound share one bucket.
	for i := range refusalKeys + 10 {
		b.take(string(rune('a'+i%26)) + time.Duration(i).String())
	}
	if len(b.buckets) > refusalKeys+1 {
		t.Errorf("%d buckets, want at most %d", len(b.buckets), refusalKeys+1)
	}
}
