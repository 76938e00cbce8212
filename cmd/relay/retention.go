package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
)

// retentionEvery is how often the daemon applies its retention policy,
// after the pass at start.
const retentionEvery = time.Hour

// passBudget bounds one prune pass (persistence.PruneOptions.Budget): an
// operator's `relay prune` call answers within it, well inside the
// client's 30 s, and calls again while the report says More; the
// daemon's own passes run pass after pass until done, so an operator's
// call never waits long behind one.
const passBudget = 10 * time.Second

// retention applies the retention policy ([retention] in config.toml):
// at start, every retentionEvery, and on an operator's `relay prune`
// (POST /v1/operator/prune). One pass runs at a time; each batch of a
// pass is its own write, so the writer serves every other request
// between two batches.
type retention struct {
	db     *persistence.DB
	policy model.RetentionPolicy
	home   string
	log    *slog.Logger
	mu     sync.Mutex
}

func newRetention(db *persistence.DB, cfg config.Config, home string, log *slog.Logger) *retention {
	return &retention{db: db, policy: cfg.Retention.Policy(), home: home, log: log}
}

// pass runs one bounded pass and removes the agent logs of the tasks it
// removed.
func (r *retention) pass(ctx context.Context, o persistence.PruneOptions) (model.PruneReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o.Budget = passBudget
	res, err := r.db.Prune(ctx, o)
	r.removeTaskLogs(res.TaskIDs)
	if n := res.AckedMessages.Removed + res.TerminalTasks.Removed + res.Audit.Removed; n > 0 || res.ReclaimedBytes > 0 {
		r.log.Info("pruned by the retention policy", "trigger", o.Trigger, "acked_messages", res.AckedMessages.Removed,
			"terminal_tasks", res.TerminalTasks.Removed, "audit_rows", res.Audit.Removed, "batches", res.Batches, "reclaimed_bytes", res.ReclaimedBytes,
			"database_bytes", res.DatabaseBytes, "more", res.More)
	}
	return res.PruneReport, err
}

// removeTaskLogs removes the agent log of each pruned task
// (logs/tasks/ID.log), which holds its agent's stderr. An id that is not
// of the relay's shape names no log: nothing outside logs/tasks is ever
// touched.
func (r *retention) removeTaskLogs(ids []string) {
	for _, id := range ids {
		if !model.ValidTaskID(id) {
			continue
		}
		err := os.Remove(filepath.Join(r.home, "logs", "tasks", id+".log"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("remove a pruned task's log", "task", id, "err", err)
		}
	}
}

// run applies the policy now and then every retentionEvery, until ctx
// ends; each time, pass after pass until nothing is left.
func (r *retention) run(ctx context.Context) {
	trigger := "start"
	tick := time.NewTicker(retentionEvery)
	defer tick.Stop()
	for {
		for {
			rep, err := r.pass(ctx, persistence.PruneOptions{Policy: r.policy, Actor: model.RelayAgent, Trigger: trigger})
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("retention pass", "trigger", trigger, "code", model.ErrorCode(err), "err", err)
				}
				break
			}
			if !rep.More {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		trigger = "periodic"
	}
}

// prune is the operator's pass (relay prune): the configured policy, with
// the request's overrides.
func (r *retention) prune(ctx context.Context, req model.PruneRequest) (model.PruneReport, error) {
	p := r.policy
	if req.AckedMessages != nil {
		p.AckedMessages = *req.AckedMessages
	}
	if req.TerminalTasks != nil {
		p.TerminalTasks = *req.TerminalTasks
	}
	if req.Audit != nil {
		p.Audit = *req.Audit
	}
	return r.pass(ctx, persistence.PruneOptions{Policy: p, DryRun: req.DryRun, Actor: "operator", Trigger: "operator"})
}

// storeLimits is the store's quota, senders' share and reserve from the
// config, where 0 means no limit.
func storeLimits(cfg config.Config) persistence.Options {
	off := func(v int64) int64 {
		if v == 0 {
			return persistence.NoLimit
		}
		return v
	}
	return persistence.Options{InboxMessages: int(off(int64(cfg.Limits.InboxMessages))), InboxBytes: off(cfg.Limits.InboxBytes),
		InboxSenderShare: cfg.Limits.InboxSenderShare, MinFreeBytes: off(cfg.Storage.MinFreeBytes)}
}
