package model

import "time"

// RetentionPolicy says how long the relay keeps what is done with: an
// acknowledged message for AckedMessages after its acknowledgement, a
// task in a terminal state for TerminalTasks after it ended. Zero keeps
// them forever. Nothing else is ever pruned: a message not acknowledged
// and a task not ended are kept whatever their age.
type RetentionPolicy struct {
	AckedMessages time.Duration `json:"acked_messages"`
	TerminalTasks time.Duration `json:"terminal_tasks"`
	// Audit is how long an audit row is kept: older rows are cut from the
	// start of the chain, behind a checkpoint that keeps the hash of the
	// last row cut (so `relay audit verify` still verifies what is left,
	// linked to what was cut). Zero keeps the log whole.
	Audit time.Duration `json:"audit"`
}

// PruneRequest asks for one pass of the retention policy. AckedMessages
// and TerminalTasks, when set, replace the configured policy's for this
// pass only (zero: keep forever, as in config); DryRun counts what the
// pass would remove and removes nothing.
type PruneRequest struct {
	AckedMessages *time.Duration `json:"acked_messages,omitempty"`
	TerminalTasks *time.Duration `json:"terminal_tasks,omitempty"`
	Audit         *time.Duration `json:"audit,omitempty"`
	DryRun        bool           `json:"dry_run"`
}

// PruneReport is what one pass of the retention policy removed (or, for a
// dry run, would remove).
type PruneReport struct {
	DryRun bool `json:"dry_run"`
	// AckedMessages are the acknowledged messages acknowledged before its
	// Before; TerminalTasks the tasks that ended before its Before (with
	// their events and gate verdicts, and their agent logs).
	AckedMessages PruneCount `json:"acked_messages"`
	TerminalTasks PruneCount `json:"terminal_tasks"`
	// Audit are the audit rows cut from the start of the chain (stamped
	// before its Before), behind the checkpoint.
	Audit PruneCount `json:"audit"`
	// Batches is how many write transactions the pass took (each holds
	// the writer for a bounded number of rows); 0 for a dry run.
	Batches int `json:"batches"`
	// ReclaimedBytes is how much the database file gives back to the
	// filesystem (incremental vacuum; 0 for a database created before the
	// relay had it, whose freed pages are reused instead). FreeBytes is
	// what stays free inside the file afterwards, reused by later writes.
	ReclaimedBytes int64 `json:"reclaimed_bytes"`
	FreeBytes      int64 `json:"free_bytes"`
	// DatabaseBytes is the database's size after the pass.
	DatabaseBytes int64 `json:"database_bytes"`
	// More says the pass stopped at its time budget with more to remove
	// (or free pages still to give back): run it again.
	More bool      `json:"more"`
	At   time.Time `json:"at"`
}

// PruneCount is one kind of row a prune pass removes.
type PruneCount struct {
	// Retention is the policy the pass applied, as a Go duration; "0s"
	// keeps these forever, and then Before is absent and nothing is
	// removed.
	Retention string     `json:"retention"`
	Before    *time.Time `json:"before,omitempty"`
	Removed   int        `json:"removed"`
	// Bytes are the bodies (messages) or prompts and results (tasks)
	// removed.
	Bytes int64 `json:"bytes"`
}

// ShortEndNotice is the body of a task's end notice when its submitter's
// inbox is over its quota: the task, its state and code, and where the
// rest is. The notice is stored all the same (it commits with the task's
// end), but without the result, which stays on the task (get_task).
func ShortEndNotice(t Task) string {
	short := t
	short.Result = ""
	short.Message = "the result and message are left out: your inbox is over its quota; get_task " + t.ID + " has them"
	return EndNotice(short)
}
