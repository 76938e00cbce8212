package machine

import "sync"

// DefaultMaxDispatch is the global dispatch limit when Options.MaxDispatch
// is not set (the default of limits.max_dispatch).
const DefaultMaxDispatch = 4

// DefaultMaxDispatchPerCaller is the share of the dispatch slots one
// caller may hold when Options.MaxDispatchPerCaller is not set (the
// default of limits.max_dispatch_per_caller): all but one of them, so
// that with more than one slot one caller never holds every slot, and
// one slot when there is only one.
func DefaultMaxDispatchPerCaller(maxDispatch int) int {
	return max(1, maxDispatch-1)
}

// slots is the dispatch limit: at most max tasks hold a slot at once, at
// most perCaller of them submitted by the same caller. A task holds a slot
// from the start of its gate evaluation until it leaves authorized/working.
// A task that finds no free slot, or whose caller holds its share, waits
// in submitted, in a queue in submission order; a freed slot goes to the
// oldest waiting task whose caller is under its share. So among callers
// under their share the order is first come, first served, and a waiting
// task is never passed over for long: every slot its caller holds frees
// when that task ends (at the latest at its task timeout), and the slot
// then goes to the caller's oldest waiting task unless an older task of
// another caller under its share takes it.
//
// A freed slot is handed over, not merely offered: it is reserved for the
// task it goes to before freed is called, so a submission racing the
// hand-over cannot take it and push the waiting task back in the queue.
type slots struct {
	mu        sync.Mutex
	max       int
	perCaller int
	holding   map[string]string // task id → its caller
	held      map[string]int    // caller → slots its tasks hold
	waiting   []waiter          // in submission order
	stopped   bool              // Quiesce: no more hand-overs
	// freed is called (outside the lock) with a waiting task that a freed
	// slot was handed to; the task holds the slot.
	freed func(next string)
}

type waiter struct{ id, caller string }

func newSlots(max, perCaller int) *slots {
	if perCaller <= 0 {
		perCaller = DefaultMaxDispatchPerCaller(max)
	}
	return &slots{max: max, perCaller: min(perCaller, max), holding: map[string]string{}, held: map[string]int{}}
}

// acquire takes a slot for task id of caller, or queues it (once) and
// reports false. A task that holds a slot (one handed to it) keeps it.
func (s *slots) acquire(id, caller string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.holding[id]; ok {
		return true
	}
	if len(s.holding) < s.max && s.held[caller] < s.perCaller {
		s.take(id, caller)
		s.dequeue(id)
		return true
	}
	for _, w := range s.waiting {
		if w.id == id {
			return false
		}
	}
	s.waiting = append(s.waiting, waiter{id, caller})
	return false
}

// take records id holding a slot. s.mu is held.
func (s *slots) take(id, caller string) {
	s.holding[id] = caller
	s.held[caller]++
}

func (s *slots) dequeue(id string) {
	for i, w := range s.waiting {
		if w.id == id {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
}

// release frees id's slot, if it holds one, and hands it to the oldest
// waiting task whose caller is under its share; a task that holds none
// leaves the queue (it ended while waiting).
func (s *slots) release(id string) {
	s.mu.Lock()
	caller, ok := s.holding[id]
	if !ok {
		s.dequeue(id)
		s.mu.Unlock()
		return
	}
	delete(s.holding, id)
	if s.held[caller]--; s.held[caller] <= 0 {
		delete(s.held, caller)
	}
	next := ""
	if !s.stopped {
		for i, w := range s.waiting {
			if s.held[w.caller] < s.perCaller {
				next = w.id
				s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
				s.take(w.id, w.caller)
				break
			}
		}
	}
	freed := s.freed
	s.mu.Unlock()
	if next != "" && freed != nil {
		freed(next)
	}
}

// stop ends the hand-overs: a slot freed from now on stays free, and the
// waiting tasks stay queued (submitted) for the next engine.
func (s *slots) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// inUse returns how many slots are held and how many tasks wait.
func (s *slots) inUse() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.holding), len(s.waiting)
}
