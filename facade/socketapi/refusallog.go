package socketapi

import (
	"sync"
	"time"
)

// Defaults of the refusal log budget: each agent may have RefusalBurst
// refused requests logged at once, and one more every RefusalEvery.
const (
	RefusalBurst = 20
	RefusalEvery = 5 * time.Second
	// refusalKeys bounds the buckets kept; callers beyond share one.
	refusalKeys = 256
)

// refusalBudget is a token bucket per calling agent for the log lines of
// refused requests: one agent sending bad requests in a loop writes a
// bounded number of lines, and cannot rotate the daemon's earlier log
// away. A request is refused all the same when its line is not logged.
type refusalBudget struct {
	mu      sync.Mutex
	now     func() time.Time
	burst   float64
	every   time.Duration
	buckets map[string]*refusalBucket
}

type refusalBucket struct {
	tokens     float64
	at         time.Time
	suppressed int // lines not logged since the last logged one
}

func newRefusalBudget(burst int, every time.Duration, now func() time.Time) *refusalBudget {
	if now == nil {
		now = time.Now
	}
	return &refusalBudget{now: now, burst: float64(burst), every: every, buckets: map[string]*refusalBucket{}}
}

// take reports whether agent's next refusal may be logged. When it may,
// suppressed is how many were not since its last logged one; when it may
// not, first reports the first refusal of a run of suppressed ones (the
// caller logs once that lines are being suppressed).
func (b *refusalBudget) take(agent string) (ok bool, suppressed int, first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	k, ok := b.buckets[agent]
	if !ok {
		if len(b.buckets) >= refusalKeys {
			agent = "(other agents)"
			k = b.buckets[agent]
		}
		if k == nil {
			k = &refusalBucket{tokens: b.burst, at: now}
			b.buckets[agent] = k
		}
	}
	if el := now.Sub(k.at); el > 0 {
		k.tokens = min(b.burst, k.tokens+float64(el)/float64(b.every))
		k.at = now
	}
	if k.tokens >= 1 {
		k.tokens--
		suppressed, k.suppressed = k.suppressed, 0
		return true, suppressed, false
	}
	k.suppressed++
	return false, 0, k.suppressed == 1
}
