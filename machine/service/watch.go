package service

import (
	"context"
	"time"

	"github.com/hai-relay/relay/model"
)

// watchPage bounds the events of one answer; a follower with more to
// read asks again at once.
const watchPage = 500

// watchRecheck is the safety net of a long poll: besides the engine's
// wake-up (Engine.Changed, closed by every commit), the store is read
// again this often while waiting, so an event committed by anything but
// the engine still arrives, this late at worst.
const watchRecheck = 2 * time.Second

// WatchEvents implements model.OperatorService: the task events after
// f.After, oldest first, or, when there is none yet, the first ones to
// commit within f.Wait. The wait is a condition, not a sleep: the engine
// closes the channel of Changed when a submission or transition commits,
// and the store is read again then. It answers with no event and the
// cursor at the log's head when f.Wait passes, and the same way, without
// an error, when ctx ends while it waits (the daemon stopping).
func (s *Service) WatchEvents(ctx context.Context, f model.EventFilter) (model.EventBatch, error) {
	if s.o.Events == nil {
		return model.EventBatch{}, model.Errorf(model.CodeInternal, "this relay's store cannot follow task events")
	}
	switch {
	case f.After < model.AfterNow:
		return model.EventBatch{}, model.InvalidArgs("after %d is not a cursor (an audit seq, or %d for now)", f.After, model.AfterNow)
	case f.Wait < 0 || f.Wait > model.MaxWatchWait:
		return model.EventBatch{}, model.InvalidArgs("wait %s is out of range 0..%s", f.Wait, model.MaxWatchWait)
	}
	if f.TaskID != "" {
		if _, err := s.task(ctx, f.TaskID); err != nil {
			return model.EventBatch{}, err
		}
	}
	if f.After == model.AfterNow {
		return s.watchStart(ctx, f.TaskID)
	}
	deadline := time.NewTimer(f.Wait)
	defer deadline.Stop()
	recheck := time.NewTicker(watchRecheck)
	defer recheck.Stop()
	for {
		var changed <-chan struct{}
		if s.o.Engine != nil {
			changed = s.o.Engine.Changed() // before the read: a later commit closes it
		}
		evs, cursor, err := s.o.Events.EventsAfter(ctx, f.TaskID, f.After, watchPage)
		if err != nil {
			return model.EventBatch{}, err
		}
		if len(evs) > 0 || f.Wait == 0 {
			return model.EventBatch{Events: nonNilEvents(evs), Cursor: cursor}, nil
		}
		f.After = cursor
		select {
		case <-changed:
		case <-recheck.C:
		case <-deadline.C:
			return model.EventBatch{Events: []model.WatchEvent{}, Cursor: cursor}, nil
		case <-ctx.Done():
			return model.EventBatch{Events: []model.WatchEvent{}, Cursor: cursor}, nil
		}
	}
}

// watchStart is WatchEvents from now: the log's head, and a task's
// history up to it.
func (s *Service) watchStart(ctx context.Context, id string) (model.EventBatch, error) {
	if id == "" {
		head, err := s.o.Events.EventsHead(ctx)
		return model.EventBatch{Events: []model.WatchEvent{}, Cursor: head}, err
	}
	t, evs, head, err := s.o.Events.TaskHistory(ctx, id)
	if model.ErrorCode(err) == model.CodeNotFound {
		return model.EventBatch{}, notFound("task", id)
	}
	if err != nil {
		return model.EventBatch{}, err
	}
	return model.EventBatch{Events: nonNilEvents(evs), Cursor: head, Task: &t}, nil
}

func nonNilEvents(evs []model.WatchEvent) []model.WatchEvent {
	if evs == nil {
		return []model.WatchEvent{}
	}
	return evs
}
