package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "prune", summary: "apply the retention policy now: remove acknowledged messages and ended tasks older than [retention] (--dry-run counts them)", usage: "[--dry-run] [--acked-messages DUR] [--terminal-tasks DUR] [--audit DUR] [--json] [--home DIR]",
		long: pruneHelp, setup: pruneCommand})
}

func pruneCommand(f *flags) runFunc {
	dry := f.Bool("dry-run", false, "count what would be removed; remove nothing")
	acked := f.Duration("acked-messages", 0, "for this run, remove messages acknowledged more than `DUR` ago instead of [retention] acked_messages (\"0\": keep them)")
	ended := f.Duration("terminal-tasks", 0, "for this run, remove tasks that ended more than `DUR` ago instead of [retention] terminal_tasks (\"0\": keep them)")
	audit := f.Duration("audit", 0, "for this run, cut audit rows older than `DUR` (behind a checkpoint) instead of [retention] audit (\"0\": keep the log whole)")
	return func(ctx context.Context, e *cliIO) error {
		var req model.PruneRequest
		req.DryRun = *dry
		for name, v := range map[string]*time.Duration{"acked-messages": acked, "terminal-tasks": ended, "audit": audit} {
			if !f.Changed(name) {
				continue
			}
			if *v < 0 {
				return f.usageError("--%s %s is negative", name, *v)
			}
			d := *v
			switch name {
			case "acked-messages":
				req.AckedMessages = &d
			case "terminal-tasks":
				req.TerminalTasks = &d
			default:
				req.Audit = &d
			}
		}
		c, home, err := operatorAt(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		// One call is one pass bounded in time; a report with More asks for
		// the next. A dry run is one read.
		var total model.PruneReport
		for first := true; ; first = false {
			rep, err := c.Prune(ctx, req)
			if noDaemon(err) {
				return notRunning(home, err)
			}
			if err != nil {
				if !first {
					fmt.Fprintf(e.stderr, "relay: prune stopped after removing %d acknowledged messages and %d ended tasks\n",
						total.AckedMessages.Removed, total.TerminalTasks.Removed)
				}
				return err
			}
			total = addReports(total, rep, first)
			if !rep.More || req.DryRun {
				break
			}
		}
		if f.json {
			return printJSON(e.stdout, total)
		}
		printPrune(e, total)
		return nil
	}
}

// addReports adds a pass's counts to the run's; the policy, storage
// figures and time are the last pass's.
func addReports(total, rep model.PruneReport, first bool) model.PruneReport {
	if first {
		return rep
	}
	rep.AckedMessages.Removed += total.AckedMessages.Removed
	rep.AckedMessages.Bytes += total.AckedMessages.Bytes
	rep.TerminalTasks.Removed += total.TerminalTasks.Removed
	rep.TerminalTasks.Bytes += total.TerminalTasks.Bytes
	rep.Audit.Removed += total.Audit.Removed
	rep.Batches += total.Batches
	rep.ReclaimedBytes += total.ReclaimedBytes
	return rep
}

// printPrune prints a run's report for a person.
func printPrune(e *cliIO, r model.PruneReport) {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	line := func(c model.PruneCount, what, since, key, bytes string) {
		if c.Before == nil {
			fmt.Fprintf(e.stdout, "%s: kept forever (a period of 0: [retention] %s or --%s)\n", what, key, strings.ReplaceAll(key, "_", "-"))
			return
		}
		fmt.Fprintf(e.stdout, "%s: %s %d, %s of %s (%s over %s ago: before %s)\n", what, verb, c.Removed,
			humanBytes(c.Bytes), bytes, since, safeText(model.ShortDuration(mustDuration(c.Retention))), c.Before.Local().Format(time.RFC3339))
	}
	line(r.AckedMessages, "acknowledged messages", "acknowledged", "acked_messages", "bodies")
	line(r.TerminalTasks, "ended tasks", "ended", "terminal_tasks", "prompts and results")
	if r.Audit.Before == nil {
		fmt.Fprintf(e.stdout, "audit rows: kept whole (a period of 0: [retention] audit or --audit)\n")
	} else {
		fmt.Fprintf(e.stdout, "audit rows: %s %d (stamped over %s ago: before %s), behind a checkpoint that keeps their digest\n", verb, r.Audit.Removed,
			safeText(model.ShortDuration(mustDuration(r.Audit.Retention))), r.Audit.Before.Local().Format(time.RFC3339))
	}
	if r.DryRun {
		fmt.Fprintf(e.stdout, "database: %s, %s of it free (reused by new writes)\n", humanBytes(r.DatabaseBytes), humanBytes(r.FreeBytes))
		return
	}
	fmt.Fprintf(e.stdout, "database: %s after %d batches; %s given back to the filesystem, %s free inside (reused by new writes)\n",
		humanBytes(r.DatabaseBytes), r.Batches, humanBytes(r.ReclaimedBytes), humanBytes(r.FreeBytes))
}

// mustDuration parses a duration the daemon wrote (0 if it cannot).
func mustDuration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// humanBytes writes n bytes in binary units with about three significant
// digits ("900 B", "1.5 KiB", "20 MiB").
func humanBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// pruneHelp is prune's --help after its synopsis: what the command
// removes, what it never removes, and how the space comes back.
const pruneHelp = `Apply the retention policy now, through the running daemon (it also does at
start and every hour): remove the messages acknowledged longer ago than
[retention] acked_messages (default 720h) and the tasks that ended
(completed, failed, canceled, rejected, blocked) longer ago than
[retention] terminal_tasks (default 2160h), with their events, verdicts and
agent logs. A message not acknowledged and a task not ended are never
removed. The audit log still verifies: it holds the digests of what was
removed. Each batch is audited (retention.pruned). Audit rows older than
[retention] audit (default 8760h) are cut from the start of the chain
behind a checkpoint that keeps the hash of the last row cut (the digest of
all of them) and is itself recorded in the chain (audit.checkpoint), so
relay audit verify still passes, from the checkpoint.

On a disk that fills, free room at once with shorter periods for this run,
for example: relay prune --acked-messages 1h`
