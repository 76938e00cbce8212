package spec

import (
	"strings"

	"github.com/hai-relay/relay/model"
)

// The slots a task code's hint may hold (CodeInfo.Hint).
const (
	// SlotAgent is filled with the task's target agent.
	SlotAgent = "{agent}"
	// SlotTask is filled with the task's id.
	SlotTask = "{task}"
)

// AdapterCauseMarker is how an agent_unsafe_mode message says that the
// adapter, not the user's settings, made the task fail (dispatch writes
// it: an adapter generation no profile covers, a session mode the adapter
// does not offer); matched without regard to case.
const AdapterCauseMarker = "the cause is the adapter"

// CauseHint is the hint of a code for one cause: chosen when the task's
// message holds Marker.
type CauseHint struct {
	Marker string
	Hint   string
}

// HintFacts are what a hint's slots are filled with.
type HintFacts struct {
	Agent  string // the task's target
	TaskID string
	// Message is the task's message, which may name the cause.
	Message string
}

// FillHint is the one filler of hints: the hint of code c for facts f
// (the hint of the cause f.Message names, else the code's default), its
// slots filled. A slot whose fact is missing reads "the agent" or "T-…"
// (only Hint leaves facts out, and no error but a task's needs them).
func FillHint(c model.Code, f HintFacts) string {
	ci, ok := Lookup(c)
	if !ok {
		return ""
	}
	hint := ci.Hint
	msg := strings.ToLower(f.Message)
	for _, ch := range ci.Causes {
		if msg != "" && strings.Contains(msg, strings.ToLower(ch.Marker)) {
			hint = ch.Hint
			break
		}
	}
	agent, task := f.Agent, f.TaskID
	if agent == "" {
		agent = "the agent"
	}
	if task == "" {
		task = "T-…" // the shape of a task id, as "M-…" is a mission's
	}
	return strings.NewReplacer(SlotAgent, agent, SlotTask, task).Replace(hint)
}

// TaskHint is the hint a task carries (model.Task.Hint): its code's, with
// its target, its id and the cause its message names filled in; "" for a
// task with no code.
func TaskHint(t model.Task) string {
	if t.Code == "" {
		return ""
	}
	return FillHint(t.Code, HintFacts{Agent: t.Target, TaskID: t.ID, Message: t.Message})
}

// WithTaskHint returns t with its hint filled (TaskHint).
func WithTaskHint(t model.Task) model.Task {
	t.Hint = TaskHint(t)
	return t
}

// PublicError is the public form of err (model.Public) with the default
// hint of its code when it carries none: what every transport shows.
func PublicError(err error) *model.Error {
	pub := model.Public(err)
	if pub.Hint == "" {
		pub.Hint = Hint(pub.Code)
	}
	return pub
}

// Errorf is model.Errorf with the code's catalogue hint: the one way a
// refusal gets its default hint (a caller with a more precise hint sets
// its own with WithHint).
func Errorf(c model.Code, format string, args ...any) *model.Error {
	return model.Errorf(c, format, args...).WithHint(Hint(c))
}
