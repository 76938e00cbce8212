package model

import (
	"context"
	"time"
)

// What a task's watch stream carries (WatchEvent.Kind).
const (
	// WatchSubmitted: the task was stored, in submitted.
	WatchSubmitted = "submitted"
	// WatchTransition: the task moved from From to To.
	WatchTransition = "transition"
	// WatchVerdict: a gate gave its verdict, recorded with the transition
	// it led to (it comes right before that transition).
	WatchVerdict = "verdict"
)

// AfterNow is EventFilter.After for "from now on": the answer carries no
// past event, only the cursor to follow from (and, for one task, that
// task's history so far).
const AfterNow = -1

// MaxWatchWait bounds EventFilter.Wait: a long poll answers within it.
// It stays inside the socket server's default read and write deadlines
// (30 s and 60 s).
const MaxWatchWait = 20 * time.Second

// WatchEvent is one thing that happened to a task, as `relay tasks watch`
// streams it: its submission, a gate verdict or a transition.
type WatchEvent struct {
	// Seq is the event's place in the relay's audit log, the cursor a
	// follower resumes after; 0 for the events of a task's history (the
	// answer's Cursor is where that history ends).
	Seq     int64             `json:"seq,omitempty"`
	At      time.Time         `json:"at"`
	TaskID  string            `json:"task_id"`
	Kind    string            `json:"kind"`
	From    State             `json:"from,omitempty"`
	To      State             `json:"to,omitempty"`
	Trigger Trigger           `json:"trigger,omitempty"`
	Gate    Gate              `json:"gate,omitempty"`
	Passed  *bool             `json:"passed,omitempty"`
	Code    Code              `json:"code,omitempty"`
	Message string            `json:"message,omitempty"`
	Actor   string            `json:"actor,omitempty"`
	Detail  map[string]string `json:"detail,omitempty"`
}

// Terminal reports whether the event put its task in a terminal state.
func (e WatchEvent) Terminal() bool { return e.Kind == WatchTransition && e.To.Terminal() }

// EventFilter selects the events of WatchEvents.
type EventFilter struct {
	// TaskID, when set, keeps one task's events (an unknown task is
	// not_found).
	TaskID string
	// After is the cursor: events after this audit seq; AfterNow for
	// none of the past (with TaskID: that task's history instead).
	After int64
	// Wait is how long to wait for an event when there is none yet (a
	// long poll); 0 answers at once. At most MaxWatchWait.
	Wait time.Duration
}

// EventBatch is WatchEvents' answer: events oldest first, and the cursor
// to ask after next.
type EventBatch struct {
	Events []WatchEvent `json:"events"`
	Cursor int64        `json:"cursor"`
	// Task is the watched task as of the batch's history (AfterNow with a
	// TaskID only), so a follower knows whether it already ended.
	Task *Task `json:"task,omitempty"`
}

// EventLog is the store's side of watching: tasks' events in commit
// order, by the audit log's seq. persistence.DB implements it.
type EventLog interface {
	// EventsAfter returns up to limit task events (submissions, verdicts,
	// transitions) with seq > after, of one task when taskID is set,
	// oldest first, and the cursor to ask after next: the last event's
	// seq, or the log's head when every event up to it was returned.
	EventsAfter(ctx context.Context, taskID string, after int64, limit int) ([]WatchEvent, int64, error)
	// TaskHistory returns a task, its events so far and the log's head,
	// read in one snapshot (not_found for an unknown task).
	TaskHistory(ctx context.Context, id string) (Task, []WatchEvent, int64, error)
	// EventsHead returns the log's head: the cursor of "from now on".
	EventsHead(ctx context.Context) (int64, error)
}
