package machine

import "sync"

// changes wakes whoever waits for the next committed task event: a
// submission or a transition (with its verdicts). It is a broadcast
// without a queue: each wait gets a channel that the next commit closes,
// so a waiter takes its channel before it reads the store and misses
// nothing committed after that read. The zero value is ready.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// next returns a channel closed at the next commit.
func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// committed wakes every waiter.
func (c *changes) committed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Changed returns a channel closed when the next task event (a submission
// or a transition) has committed. Take it before reading the store: then
// an event committed after the read closes it. The socket API's event
// route waits on it (relay tasks watch).
func (e *Engine) Changed() <-chan struct{} { return e.changes.next() }
