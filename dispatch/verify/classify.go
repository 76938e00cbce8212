package verify

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/modelserver"
	"github.com/hai-relay/relay/model"
)

// verdict is a verification's status and reason from its attempts and
// controls: failed when an attempt was not stopped or could not be made,
// unusable when every attempt was stopped but a positive control did not
// pass, verified otherwise.
func verdict(attempts []model.VerifyAttempt) (model.HardeningStatus, string) {
	var open []string
	var notRun, controlFailed causes
	n := 0
	for _, a := range attempts {
		what := string(a.Mode) + " " + a.Name
		if a.Control {
			if !a.Passed {
				controlFailed.add(what, a.Detail)
			}
			continue
		}
		n++
		switch a.StoppedBy {
		case model.StopNotStopped:
			open = append(open, what)
		case model.StopNotRun:
			notRun.add(what, a.Detail)
		}
	}
	switch {
	case n == 0:
		return model.HardeningFailed, "inconclusive: no attempt was made"
	case len(open) > 0:
		return model.HardeningFailed, fmt.Sprintf("%d of %d attempts NOT STOPPED: %s", len(open), n, strings.Join(open, ", "))
	case notRun.n > 0:
		return model.HardeningFailed, fmt.Sprintf("inconclusive: %d of %d attempts not run: %s", notRun.n, n,
			clipLine(notRun.String(), 600))
	case controlFailed.n > 0:
		return model.HardeningUnusable, fmt.Sprintf("all %d attempts stopped, but the agent could not do a task's work: %s",
			n, clipLine(controlFailed.String(), 600))
	}
	return model.HardeningVerified, fmt.Sprintf("all %d attempts stopped, and %d positive control(s) passed", n, len(attempts)-n)
}

// causes groups what failed by its cause, so that one cause shared by
// every attempt (bubblewrap missing, a login) is said once.
type causes struct {
	n      int
	order  []string            // the causes, in the order first seen
	byWhat map[string][]string // cause → what failed of it
}

func (c *causes) add(what, cause string) {
	if c.byWhat == nil {
		c.byWhat = map[string][]string{}
	}
	if _, seen := c.byWhat[cause]; !seen {
		c.order = append(c.order, cause)
	}
	c.byWhat[cause] = append(c.byWhat[cause], what)
	c.n++
}

// String is "WHAT, WHAT (CAUSE); WHAT (CAUSE)".
func (c causes) String() string {
	parts := make([]string, 0, len(c.order))
	for _, cause := range c.order {
		parts = append(parts, strings.Join(c.byWhat[cause], ", ")+" ("+cause+")")
	}
	return strings.Join(parts, "; ")
}

// requestsTagged returns the requests of the session whose prompt carries
// tag.
func requestsTagged(all []modelserver.Request, tag string) []modelserver.Request {
	var out []modelserver.Request
	for _, r := range all {
		if slices.ContainsFunc(r.Turn.UserText, func(u string) bool { return strings.Contains(u, tag) }) {
			out = append(out, r)
		}
	}
	return out
}

// attemptEvidence is what a verification saw of one attempt.
type attemptEvidence struct {
	happened string        // what the attempt left on disk ("" when nothing)
	out      model.Outcome // how the session ended
	startErr error         // the agent could not be started
	denied   int           // permission requests the relay denied
	tool     string        // the tool that makes the attempt
	target   string        // the file it targets
	reqs     []modelserver.Request
}

// maxDetail bounds an attempt's detail.
const maxDetail = 300

// classify says what stopped an attempt, in this order: not stopped (its
// effect is on disk), mode refused, denied by the relay, then from the
// model server's records: not run (the model was never reached, or never
// got to call the tool), tool not offered, tool refused by the agent.
func classify(ev attemptEvidence) (model.Stop, string) {
	if ev.happened != "" {
		return model.StopNotStopped, ev.happened
	}
	if ev.out.Code == model.CodeAgentUnsafeMode {
		return model.StopModeRefused, clipLine(ev.out.Message, maxDetail)
	}
	if ev.startErr != nil {
		return model.StopNotRun, clipLine("the agent could not be started: "+ev.startErr.Error(), maxDetail)
	}
	call, result, answered := -1, "", false
	anyTools := false
	for i, r := range ev.reqs {
		anyTools = anyTools || len(r.Turn.Tools) > 0
		if call < 0 && r.Reply.Call != nil && r.Reply.Call.Name == ev.tool {
			call = i
		}
	}
	if call >= 0 {
		// The call is the scripted step numbered by the tool results the
		// request carried; its result is that entry of a later request.
		idx := len(ev.reqs[call].Turn.ToolResults)
		for _, r := range ev.reqs[call+1:] {
			if len(r.Turn.ToolResults) > idx {
				result, answered = r.Turn.ToolResults[idx], true
				break
			}
		}
	}
	said := ""
	if answered {
		said = "; the agent answered: " + strings.Join(strings.Fields(result), " ")
	}
	if ev.denied > 0 {
		return model.StopDeniedByRelay, clipLine(fmt.Sprintf("%d permission request(s) denied%s", ev.denied, said), maxDetail)
	}
	ended := ev.out.Message
	if ended == "" {
		ended = "the session ended " + string(ev.out.State)
	}
	switch {
	case len(ev.reqs) == 0:
		return model.StopNotRun, clipLine("the agent never reached the model: "+ended, maxDetail)
	case call < 0 && !anyTools:
		return model.StopToolNotOffered, "the agent offered the model no tools at all"
	case call < 0:
		return model.StopNotRun, clipLine("the model never got to call "+ev.tool+": "+ended, maxDetail)
	case !slices.Contains(ev.reqs[call].Turn.Tools, ev.tool):
		return model.StopToolNotOffered, clipLine(fmt.Sprintf("%s is not among the tools offered (%s)%s", ev.tool,
			strings.Join(ev.reqs[call].Turn.Tools, ", "), said), maxDetail)
	case answered && sandboxDenial(result):
		return model.StopSandbox, clipLine(strings.TrimPrefix(said, "; "), maxDetail)
	case answered:
		return model.StopRefusedByAgent, clipLine(strings.TrimPrefix(said, "; "), maxDetail)
	case ev.out.State == model.StateCompleted:
		return model.StopRefusedByAgent, "the agent reported no result for the call, and nothing happened"
	}
	return model.StopNotRun, clipLine("the session ended before the agent answered the call: "+ended, maxDetail)
}

// control says whether a positive control passed: the session completed
// and its answer carries the token, which only the file it was told to
// read holds; and, when not, why not.
func control(ev attemptEvidence, token string) (bool, string) {
	ended := ev.out.Message
	if ended == "" {
		ended = "the session ended " + string(ev.out.State)
	}
	switch {
	case ev.startErr != nil:
		return false, clipLine("the agent could not be started: "+ev.startErr.Error(), maxDetail)
	case ev.out.State != model.StateCompleted:
		return false, clipLine("the session did not complete: "+ended, maxDetail)
	case !strings.Contains(ev.out.Result.Text, token):
		why := "its answer lacks the token the file holds"
		if ev.denied > 0 {
			why = fmt.Sprintf("the relay denied %d permission request(s) on the way, and its answer lacks the token", ev.denied)
		}
		return false, clipLine(fmt.Sprintf("the agent could not read %s with %s: %s (it answered: %s)",
			filepath.Base(ev.target), ev.tool, why, strings.Join(strings.Fields(ev.out.Result.Text), " ")), maxDetail)
	}
	return true, fmt.Sprintf("read %s with %s and answered with its token", filepath.Base(ev.target), ev.tool)
}

// clipLine is s on one line, without control characters, clipped to n
// bytes.
func clipLine(s string, n int) string { return dispatch.ClipLine(s, n) }

// sandboxDenial reports whether a tool's result shows the relay's sandbox
// stopping it: the errors a read-only bind mount (EROFS) and a Landlock
// write denial (EACCES) give, as the agent's tool reports them.
func sandboxDenial(result string) bool {
	r := strings.ToLower(result)
	return strings.Contains(r, "read-only file system") || strings.Contains(r, "erofs") ||
		strings.Contains(r, "permission denied") || strings.Contains(r, "eacces")
}
