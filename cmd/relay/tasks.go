package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "tasks list", summary: "list tasks, newest first (--state, --agent, --limit, --before)", usage: "[--state S] [--agent A] [--limit N] [--before TASK_ID] [--json]", setup: tasksListCommand, wide: true})
	register(command{name: "tasks show", summary: "show a task with its timeline of events and gate verdicts", usage: "TASK_ID [--json]", args: oneArg("a task id", "T-…"), setup: tasksShowCommand, wide: true})
	register(command{name: "tasks cancel", summary: "cancel a task as the operator", usage: "TASK_ID [--json]", args: oneArg("a task id", "T-…"), setup: tasksCancelCommand})
}

func tasksListCommand(f *flags) runFunc {
	state := f.String("state", "", "only tasks in `STATE`: "+stateNames())
	agent := f.String("agent", "", "only tasks `AGENT` submitted or targets")
	limit := f.Int("limit", model.DefaultPageSize, fmt.Sprintf("at most `N` tasks (1..%d)", model.MaxPageSize))
	before := f.String("before", "", "page: tasks older than `TASK_ID`")
	return func(ctx context.Context, e *cliIO) error {
		if err := f.checkLimit(*limit); err != nil {
			return err
		}
		if *state != "" && !model.State(*state).Valid() {
			return model.Errorf(model.CodeInvalidArgs, "--state %q is not a task state", model.Echo(*state)).
				WithHint("pass one of: " + stateNames())
		}
		c, err := operator(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		tasks, err := c.Tasks(ctx, model.TaskFilter{State: model.State(*state), Agent: *agent, Limit: *limit, Before: *before})
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(e.stdout, map[string]any{"tasks": tasks})
		}
		t := f.newTable(e.stdout, "TASK", "STATE", "CODE", "CALLER", "TARGET", "MODE", "UPDATED")
		for _, x := range tasks {
			t.row(x.ID, string(x.State), string(x.Code), x.Caller, x.Target, string(x.Mode), ts(x.UpdatedAt))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(tasks) > 0 {
			morePages(e, len(tasks), *limit, tasks[len(tasks)-1].ID, "tasks list")
		}
		return nil
	}
}

// stateNames lists the task states for --state, in lifecycle order.
func stateNames() string {
	var ns []string
	for _, s := range model.AllStates() {
		ns = append(ns, string(s))
	}
	return strings.Join(ns, ", ")
}

func tasksShowCommand(f *flags) runFunc {
	return func(ctx context.Context, e *cliIO) error {
		c, home, err := operatorAt(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		d, err := c.ShowTask(ctx, f.pos[0])
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(e.stdout, d)
		}
		return printTask(e.stdout, home, d, f.wide)
	}
}

// printTask prints task d of the relay home for a person: its fields,
// its delegation chain, its session and its timeline of events and gate
// verdicts, then where to look next.
func printTask(w io.Writer, home string, d model.TaskDetail, wide bool) error {
	// Every stored string goes through safeText (or oneLine): a client or
	// an agent wrote it, and it must not act on the terminal.
	fmt.Fprintf(w, "task      %s\nstate     %s", safeText(d.ID), safeText(string(d.State)))
	if d.Code != "" {
		fmt.Fprintf(w, " (%s)", safeText(string(d.Code)))
	}
	fmt.Fprintf(w, "\nmessage   %s\ncaller    %s\ntarget    %s\nmode      %s\nmission   %s\nlease     %s\ncontext   %s\ncwd       %s\ncreated   %s\nupdated   %s\n",
		oneLine(d.Message, 200), safeText(d.Caller), safeText(d.Target), safeText(string(d.Mode)), oneLine(d.MissionID, 130), oneLine(d.LeaseID, 130),
		safeText(d.ContextID), safeText(d.Cwd), ts(d.CreatedAt), ts(d.UpdatedAt))
	// The delegation chain: who delegated to whom down to this task, and
	// the tasks it went through (a top-level task is its own chain).
	if d.ParentTaskID != "" {
		fmt.Fprintf(w, "parent    %s\n", safeText(d.ParentTaskID))
	}
	fmt.Fprintf(w, "chain     %s (depth %d", oneLine(d.Path(), 600), d.Depth())
	if d.ParentTaskID == "" {
		fmt.Fprint(w, ", top-level")
	}
	fmt.Fprintln(w, ")")
	for _, h := range d.Chain {
		fmt.Fprintf(w, "          %s %s → %s\n", safeText(h.TaskID), safeText(h.Caller), safeText(h.Target))
	}
	if d.StopReason != "" || d.Result != "" {
		fmt.Fprintf(w, "stop      %s\nresult    %s\n", safeText(d.StopReason), oneLine(d.Result, 400))
	}
	if d.SessionMode != "" {
		fmt.Fprintf(w, "session   mode %s\n", oneLine(d.SessionMode, 60))
	}
	for _, ev := range d.Events {
		if ev.To == model.StateWorking && ev.Message != "" {
			// How the session was set up: its mode, the hardening profile
			// and the adapter version (cut in the timeline below).
			fmt.Fprintf(w, "setup     %s\n", oneLine(ev.Message, 600))
		}
	}
	if d.DeniedPermissions == 0 {
		fmt.Fprintln(w, "denied    none: no permission request reached the relay")
	} else {
		fmt.Fprintf(w, "denied    %d permission request(s), every one refused by the relay\n", d.DeniedPermissions)
	}
	for _, tc := range d.ToolCalls {
		fmt.Fprintf(w, "tool      %s [%s] %s\n", oneLine(tc.Title, 160), oneLine(tc.Kind, 20), oneLine(tc.Status, 20))
	}
	fmt.Fprintln(w, "\ntimeline:")
	t := newTable(w, "  AT", "KIND", "FROM", "TO", "TRIGGER/GATE", "CODE", "DETAIL")
	t.wide = wide
	gate := func(v model.Verdict) {
		t.row("  "+ts(v.At), "gate", "", "", string(v.Gate), string(v.Code), verdictText(forMode(v, d.Mode)))
	}
	t.row("  "+ts(d.CreatedAt), "submitted", "-", "submitted", "submit", "", d.Path())
	// Verdicts are recorded with the transition they led to: show each
	// evaluation's verdicts right before that transition.
	vi := 0
	for _, ev := range d.Events {
		for vi < len(d.Verdicts) && !d.Verdicts[vi].At.After(ev.At) {
			gate(d.Verdicts[vi])
			vi++
		}
		t.row("  "+ts(ev.At), "event", string(ev.From), string(ev.To), string(ev.Trigger), string(ev.Code), ev.Message)
	}
	for ; vi < len(d.Verdicts); vi++ {
		gate(d.Verdicts[vi])
	}
	if err := t.flush(); err != nil {
		return err
	}
	// Where to look next: the agent's own log and what the code means.
	if log := filepath.Join(home, "logs", "tasks", d.ID+".log"); fileExists(log) {
		fmt.Fprintf(w, "\nagent log %s\n", safeText(log))
	}
	if d.Hint != "" {
		fmt.Fprintf(w, "hint      %s\n", safeText(d.Hint))
	}
	return nil
}

// forMode is verdict v as it reads for a task of mode m. The acpDenial
// verdict names the hardening profile with its rule for every mode; the
// rules of the other modes do not apply to the task, and would read as if
// they did.
func forMode(v model.Verdict, m model.Mode) model.Verdict {
	if v.Gate != model.GateACPDenial {
		return v
	}
	for _, other := range model.AllModes() {
		if rule := v.Detail["profile_"+string(other)]; other != m && rule != "" {
			v.Message = strings.Replace(v.Message, "; "+string(other)+": "+rule, "", 1)
		}
	}
	return v
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func verdictText(v model.Verdict) string {
	s := "fail"
	if v.Passed {
		s = "pass"
	}
	if v.Message != "" {
		s += ": " + v.Message
	}
	if c := v.Detail["adapter_code"]; c != "" {
		s += " [adapter: " + c + "]"
	}
	// The authority adapter's run, as --json has it: how it exited, how
	// long it took, what it said on stderr.
	if v.Gate == model.GateAuthority {
		var run []string
		if x := v.Detail["exit_code"]; x != "" && x != "-1" {
			run = append(run, "exit "+x)
		}
		if x := v.Detail["elapsed"]; x != "" {
			run = append(run, x)
		}
		if x := v.Detail["error"]; x != "" {
			run = append(run, x)
		}
		if x := strings.TrimSpace(v.Detail["stderr"]); x != "" {
			run = append(run, "stderr: "+x)
		}
		if len(run) > 0 {
			s += " (" + strings.Join(run, "; ") + ")"
		}
	}
	return s
}

func tasksCancelCommand(f *flags) runFunc {
	return func(ctx context.Context, e *cliIO) error {
		c, err := operator(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		t, err := c.CancelTaskAsOperator(ctx, f.pos[0])
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(e.stdout, t)
		}
		fmt.Fprintf(e.stdout, "task %s %s (%s)\n", safeText(t.ID), safeText(string(t.State)), safeText(string(t.Code)))
		return nil
	}
}
