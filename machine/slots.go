package machine

import "sync"

// DefaultMaxDispatch is the global dispatch limit when Options.MaxDispatch
// is not set (the default of limits.max_dispatch).
const DefaultMaxDispatch = 4

// slots is the global dispatch limit: a task holds a slot from the start of
// its gate evaluation until it leaves authorized/working, and tasks that
// find no free slot wait, in submission order, in submitted.
type slots struct {
	mu      sync.Mutex
	max     int
	holding map[string]bool
	waiting []string
	// freed is called (outside the lock) when a slot frees up and a waiting
	// task may be evaluated.
	freed func(next string)
}

func newSlots(max int) *slots {
	return &slots{max: max, holding: map[string]bool{}}
}

// acquire takes a slot for id, or queues id (once) and reports false.
func (s *slots) acquire(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holding[id] {
		return true
	}
	if len(s.holding) < s.max {
		s.holding[id] = true
		s.dequeue(id)
		return true
	}
	for _, w := range s.waiting {
		if w == id {
			return false
		}
	}
	s.waiting = append(s.waiting, id)
	return false
}

func (s *slots) dequeue(id string) {
	for i, w := range s.waiting {
		if w == id {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
}

// release frees id's slot, if it holds one, and hands the next waiting task
// to freed.
func (s *slots) release(id string) {
	s.mu.Lock()
	if !s.holding[id] {
		s.mu.Unlock()
		return
	}
	delete(s.holding, id)
	var next string
	if len(s.waiting) > 0 {
		next = s.waiting[0]
		s.waiting = s.waiting[1:]
	}
	freed := s.freed
	s.mu.Unlock()
	if next != "" && freed != nil {
		freed(next)
	}
}

// inUse returns how many slots are held and how many tasks wait.
func (s *slots) inUse() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.holding), len(s.waiting)
}
