package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "tasks watch", summary: "follow task events live: one task until it ends (its history first), or every task from now on", usage: "[TASK_ID] [--json]", args: maxArgs(1), setup: tasksWatchCommand})
}

// runTasksWatch follows task events through the daemon's long poll (GET
// /v1/operator/events): each call answers as soon as an event commits,
// so lines arrive as the task moves, without a polling loop here. With a
// task id it prints the history so far, follows, and exits 0 when the
// task reaches a terminal state; without one it follows every task until
// interrupted (Ctrl-C exits 0).
func tasksWatchCommand(f *flags) runFunc {
	return func(ctx context.Context, e *cliIO) error {
		id := ""
		if len(f.pos) == 1 {
			id = f.pos[0]
		}
		c, err := operator(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		p := watchPrinter{w: e.stdout, json: f.json}
		b, err := c.WatchEvents(ctx, model.EventFilter{TaskID: id, After: model.AfterNow})
		if err != nil {
			return interrupted(ctx, err)
		}
		for _, ev := range b.Events {
			if err := p.print(ev); err != nil {
				return err
			}
		}
		if b.Task != nil && b.Task.State.Terminal() {
			return nil
		}
		for cursor := b.Cursor; ; {
			b, err := c.WatchEvents(ctx, model.EventFilter{TaskID: id, After: cursor, Wait: model.MaxWatchWait})
			if err != nil {
				return interrupted(ctx, err)
			}
			for _, ev := range b.Events {
				if err := p.print(ev); err != nil {
					return err
				}
				if id != "" && ev.Terminal() {
					return nil
				}
			}
			cursor = b.Cursor
		}
	}
}

// interrupted is nil when the command was interrupted (Ctrl-C, SIGTERM):
// stopping a watch is how it ends, not an error.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// watchPrinter prints one line per event: a table-like line, or with
// --json one JSON object (written at once: stdout is not buffered).
type watchPrinter struct {
	w    io.Writer
	json bool
}

func (p watchPrinter) print(ev model.WatchEvent) error {
	if p.json {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = p.w.Write(append(b, '\n'))
		return err
	}
	// Every stored string goes through safeText or oneLine: a client or
	// an agent wrote it, and it must not act on the terminal.
	var what string
	switch ev.Kind {
	case model.WatchSubmitted:
		what = fmt.Sprintf("submitted  %s", oneLine(ev.Message, 200))
	case model.WatchVerdict:
		v := model.Verdict{Gate: ev.Gate, Passed: ev.Passed != nil && *ev.Passed, Code: ev.Code, Message: ev.Message, Detail: ev.Detail}
		what = fmt.Sprintf("gate       %s %s", safeText(string(ev.Gate)), oneLine(verdictText(v), 400))
	default:
		what = fmt.Sprintf("%s → %s  %s", safeText(string(ev.From)), safeText(string(ev.To)), safeText(string(ev.Trigger)))
		if ev.Code != "" {
			what += "  " + safeText(string(ev.Code))
		}
		if ev.Message != "" {
			what += "  " + oneLine(ev.Message, 300)
		}
	}
	_, err := fmt.Fprintf(p.w, "%s  %s  %s\n", ts(ev.At), safeText(ev.TaskID), strings.TrimRight(what, " "))
	return err
}
