package gates

import (
	"time"

	"github.com/hai-relay/relay/model"
)

// HasEvaluator reports whether gate g has an evaluator (for the tests).
func HasEvaluator(g model.Gate) bool {
	_, ok := evaluators[g]
	return ok
}

// Test-only options: the daemon runs the adapter with the default grace
// and the real clock.

// WithGrace sets how long output is still read after the adapter exits or
// its group is killed (DefaultAuthorityGrace). A grandchild holding stdout
// open delays a consultation by at most this much, twice.
func WithGrace(d time.Duration) AuthorityOption {
	return func(a *adapter) {
		if d >= 0 {
			a.grace = d
		}
	}
}

// WithClock sets the clock that stamps requests without a time.
func WithClock(now func() time.Time) AuthorityOption {
	return func(a *adapter) {
		if now != nil {
			a.now = now
		}
	}
}
