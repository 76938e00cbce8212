package hardening

import (
	"encoding/json"
	"fmt"
	"strings"
)

// What a hardening verification (package dispatch/verify) needs of a
// profile: the agent's tools, and how its launch is pointed at the
// scripted model.

// ToolVocab is an agent's file and shell tools and their argument names,
// from which its attempts' scripts are written.
type ToolVocab struct {
	// Write, Read, Edit and Shell name the tools. Read, when set, is
	// called on the file before Edit (Claude Code edits only a file it
	// has read).
	Write, Read, Edit, Shell string
	// Path, Old and New name the file path and edit arguments (content is
	// "content" everywhere).
	Path, Old, New string
	// ShellArg names the shell tool's command argument ("command" when
	// empty).
	ShellArg string
	// EditExtra are further arguments of the edit tool.
	EditExtra map[string]any
	// ShellOnly: every attempt is a shell command (Codex writes and edits
	// through its shell tool).
	ShellOnly bool
	// Reader is the tool the positive control reads its file with (Read
	// when empty; cat through Shell when ShellOnly).
	Reader string
}

// VerifySpec is how a profile's agent is verified offline.
type VerifySpec struct {
	// Vocab writes the attempts with the agent's own tools.
	Vocab ToolVocab
	// Redirect returns what the agent's launch gets, after the rule's own
	// environment and arguments (so it wins), for the agent to talk to the
	// scripted model at to.URL, with to.Key as its API key, and to no other
	// model. ruleEnv is the rule's environment for the session (nil when
	// the session runs without a rule). The key reaches the agent through
	// its environment only: other users can read a process's arguments.
	Redirect func(to ScriptedModel, ruleEnv []string) (Launch, error)
	// Refuse, when set, returns why the agent cannot be verified on this
	// machine without going to the network or touching the user's
	// settings or credentials, or "".
	Refuse func() string
	// NoModel, when set, says why the agent's model cannot be pointed at
	// the scripted model (Cursor's): no attempt or control is run, each
	// is reported not run with this reason, and only the Offline checks
	// are made. Redirect is then unused.
	NoModel string
	// Offline, when set, are the checks a NoModel verification makes:
	// what can be checked on this machine without the agent's model.
	Offline func() []OfflineCheck
}

// OfflineCheck is one check of a profile that needs no model.
type OfflineCheck struct {
	Name   string
	Passed bool
	Detail string
}

// Launch is what a verification adds to an agent's launch.
type Launch struct {
	Env   []string // added last, so it wins
	Args  []string // appended to the argv
	Unset []string // removed from the environment
	// EnvJSON is merged into JSON variables after the rule's (Rule.EnvJSON).
	EnvJSON map[string]map[string]any
}

// Adds reports whether l adds anything.
func (l Launch) Adds() bool {
	return len(l.Env)+len(l.Args)+len(l.Unset)+len(l.EnvJSON) > 0
}

// ScriptedModel is where a verification's agent finds its model: the
// scripted server's base URL and the key it serves.
type ScriptedModel struct {
	URL, Key string
}

// verifyProvider names the provider a verification adds (Codex, OpenCode).
const verifyProvider = "relay-verify"

// addJSONKeys adds keys to the JSON object obj ("" is {}), keeping its
// own keys where and as they are (OpenCode's config merge keeps key order,
// which its permission rules depend on). A key obj already has is an
// error.
func addJSONKeys(obj string, keys []string, values []any) (string, error) {
	obj = strings.TrimSpace(obj)
	if obj == "" {
		obj = "{}"
	}
	var have map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &have); err != nil || have == nil {
		return "", fmt.Errorf("not a JSON object: %v", err)
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(obj, "}"))
	sep := ","
	if len(have) == 0 {
		sep = ""
	}
	for i, k := range keys {
		if _, dup := have[k]; dup {
			return "", fmt.Errorf("it already has a key %q", k)
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(values[i])
		if err != nil {
			return "", err
		}
		b.WriteString(sep)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
		sep = ","
	}
	b.WriteByte('}')
	return b.String(), nil
}
