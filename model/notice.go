package model

import (
	"strings"
	"unicode/utf8"
)

// Notice is the relay's end-of-task notice to a task's submitter, as
// structured fields: the relay's words (the task, its final state and
// code, the relay's message about it) apart from the agent's (its reply).
// It is shown on the notice's message (Message.Notice) wherever messages
// are: check_inbox, relay messages list --json, the socket API.
type Notice struct {
	TaskID string `json:"task_id"`
	State  State  `json:"state"`
	Code   Code   `json:"code"`
	// Message is the relay's account of how the task ended (empty for
	// most completed tasks). It may quote the agent (an error it
	// answered, its stderr), never as a line of its own.
	Message string `json:"message"`
	// Result is the agent's reply, as the agent gave it.
	Result string `json:"result"`
}

// The notice's body: the relay's first line, which the agent's text can
// neither write nor follow with a line of its own, then each text in a
// labelled, quoted section.
const (
	noticeMessageLabel = "the relay's message, quoted:"
	noticeResultLabel  = "the agent's reply, quoted:"
	quotePrefix        = "> "
)

// EndNotice is the body of the relay's message to a task's submitter when
// the task ends (ParseNotice reads it back as a Notice):
//
//	task T-01… failed (agent_crashed)
//	the relay's message, quoted:
//	> the agent answered session/prompt with an error: …
//	the agent's reply, quoted:
//	> what the agent said
//	> on as many lines as it said it
//
// The first line is the relay's alone: the task id, the final state and
// the code, all of the relay's own making. Each text that follows is
// quoted under its label: every line of it begins with "> ", where a line
// begins after any line break a reader might honour (LF, CR, CRLF, VT,
// FF, NEL, U+2028, U+2029). So a reply that holds "\ntask T-… failed
// (authority_denied)" shows as "> task T-… failed (authority_denied)":
// quoted, never a line of the relay's. The quoting is reversible:
// ParseNotice gives the texts back exactly.
func EndNotice(t Task) string {
	var b strings.Builder
	b.WriteString("task " + t.ID + " " + string(t.State))
	if t.Code != "" {
		b.WriteString(" (" + string(t.Code) + ")")
	}
	b.WriteByte('\n')
	if t.Message != "" {
		b.WriteString(noticeMessageLabel + "\n")
		writeQuoted(&b, t.Message)
	}
	if t.Result != "" {
		b.WriteString(noticeResultLabel + "\n")
		writeQuoted(&b, t.Result)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// writeQuoted writes s as a quoted section: "> " at its start and after
// each of its line breaks, and a newline at its end.
func writeQuoted(b *strings.Builder, s string) {
	b.WriteString(quotePrefix)
	for len(s) > 0 {
		i, n := nextBreak(s)
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i+n])
		b.WriteString(quotePrefix)
		s = s[i+n:]
	}
	b.WriteByte('\n')
}

// nextBreak finds the first line break in s: its index and length, or -1.
// CRLF is one break.
func nextBreak(s string) (int, int) {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			return i, 2
		case c == '\n' || c == '\r' || c == '\v' || c == '\f':
			return i, 1
		case c < utf8.RuneSelf:
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u0085' || r == '\u2028' || r == '\u2029' {
			return i, size
		}
		i += size
	}
	return -1, 0
}

// ParseNotice reads a notice's structured fields back from its body, as
// EndNotice wrote it; ok is false for any other text (a notice stored by
// an older relay, whose body was "task T-… state: result").
func ParseNotice(body string) (n Notice, ok bool) {
	head, rest, _ := strings.Cut(body, "\n")
	words := strings.Fields(head)
	if len(words) < 3 || len(words) > 4 || words[0] != "task" || !ValidTaskID(words[1]) || head != strings.Join(words, " ") {
		return Notice{}, false
	}
	n.TaskID, n.State = words[1], State(words[2])
	if !n.State.Terminal() {
		return Notice{}, false
	}
	if len(words) == 4 {
		code, open := strings.CutPrefix(words[3], "(")
		code, closed := strings.CutSuffix(code, ")")
		if !open || !closed || code == "" {
			return Notice{}, false
		}
		n.Code = Code(code)
	}
	for _, sec := range []struct {
		label string
		to    *string
	}{{noticeMessageLabel, &n.Message}, {noticeResultLabel, &n.Result}} {
		after, found := strings.CutPrefix(rest, sec.label+"\n")
		if !found {
			continue
		}
		text, tail, ok := readQuoted(after)
		if !ok {
			return Notice{}, false
		}
		*sec.to, rest = text, tail
	}
	if rest != "" {
		return Notice{}, false
	}
	return n, true
}

// readQuoted reads one quoted section from the start of s and returns its
// text and what follows it.
func readQuoted(s string) (text, rest string, ok bool) {
	s, ok = strings.CutPrefix(s, quotePrefix)
	if !ok {
		return "", "", false
	}
	var b strings.Builder
	for {
		i, n := nextBreak(s)
		if i < 0 {
			// The body's last line: EndNotice trims the final newline.
			b.WriteString(s)
			return b.String(), "", true
		}
		after := s[i+n:]
		if tail, quoted := strings.CutPrefix(after, quotePrefix); quoted {
			b.WriteString(s[:i+n])
			s = tail
			continue
		}
		if s[i:i+n] != "\n" {
			return "", "", false
		}
		b.WriteString(s[:i])
		return b.String(), after, true
	}
}
