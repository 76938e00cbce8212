package dispatch

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch/hardening"
)

// What the session does with its hardening rule (package
// dispatch/hardening holds the profiles and their rules): the files and
// directories it writes for it, and the mode state it checks against it.

// ruleArgv returns the agent's argv under rule r, writing its Files to
// dir.
func ruleArgv(r *hardening.Rule, base []string, dir func() (string, error)) ([]string, error) {
	if len(r.Args) == 0 {
		return base, nil
	}
	d := ""
	if len(r.Files) > 0 {
		var err error
		if d, err = dir(); err != nil {
			return nil, err
		}
		for name, content := range r.Files {
			if err := writePrivate(filepath.Join(d, name), content); err != nil {
				return nil, err
			}
		}
	}
	out := slices.Clone(base)
	for _, a := range r.Args {
		out = append(out, strings.ReplaceAll(a, "{dir}", d))
	}
	return out, nil
}

// writePrivate writes a file 0600 unless it already holds content.
// Sessions starting at once write the same profile file (replaceFile).
func writePrivate(path, content string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == content {
		return nil
	}
	return replaceFile(path, []byte(content))
}

// makeOwnDir makes the session's own directory (Rule.OwnDir) and returns
// the variable that points the agent at it.
func (s *session) makeOwnDir(env []string) ([]string, error) {
	od := s.rule.OwnDir
	files, err := od.Files(env)
	if err != nil {
		return nil, err
	}
	base, err := s.d.profileDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, strings.ToLower(od.Var)+"-")
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := writePrivate(filepath.Join(dir, name), files[name]); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	s.ownDir = dir
	s.log.Printf("%s is %s, the session's own, holding only %s", od.Var, dir, strings.Join(slices.Sorted(maps.Keys(files)), ", "))
	return []string{od.Var + "=" + dir}, nil
}

// modeOptionID is the config option by which agents that have one report
// their mode as well.
const modeOptionID acp.SessionConfigId = "mode"

// modeState is what the relay knows of a session's mode and config
// options, from session/new, its own set calls and the agent's updates.
type modeState struct {
	// foreignMode, when set, is a session the relay did not open that
	// reported a mode change: never accepted.
	foreignMode string
	mode        acp.SessionModeId
	hasMode     bool
	available   []acp.SessionModeId // offered at session/new
	options     map[acp.SessionConfigId]acp.SessionConfigValueId
}

func (m modeState) clone() modeState {
	m.options = maps.Clone(m.options)
	m.available = slices.Clone(m.available)
	return m
}

func (m *modeState) setOptions(opts []acp.SessionConfigOption) {
	for _, o := range opts {
		if o.Select != nil {
			if m.options == nil {
				m.options = map[acp.SessionConfigId]acp.SessionConfigValueId{}
			}
			m.options[o.Select.Id] = o.Select.CurrentValue
		}
	}
}

// unsafeState returns why the session's state m is not one rule r
// accepts, or "" when it is.
func unsafeState(r *hardening.Rule, m modeState) string {
	if m.foreignMode != "" {
		return fmt.Sprintf("session %q, which the relay did not open, changed its mode", m.foreignMode)
	}
	if len(r.AcceptModes) > 0 {
		if !m.hasMode {
			return fmt.Sprintf("the agent reports no session mode (accepted: %s)", quoteModes(r.AcceptModes))
		}
		if !slices.Contains(r.AcceptModes, m.mode) {
			return fmt.Sprintf("the session is in mode %q (accepted: %s)", m.mode, quoteModes(r.AcceptModes))
		}
		// An agent that also reports its mode as the config option "mode"
		// (claude-agent-acp) is held to the same values there.
		if v, ok := m.options[modeOptionID]; ok && !slices.Contains(r.AcceptModes, acp.SessionModeId(v)) {
			return fmt.Sprintf("the session's mode option is %q (accepted: %s)", v, quoteModes(r.AcceptModes))
		}
	}
	for _, pin := range r.Options {
		v, ok := m.options[pin.ID]
		switch {
		case !ok:
			return fmt.Sprintf("the agent reports no config option %q (required: %q)", pin.ID, pin.Value)
		case v != pin.Value:
			return fmt.Sprintf("config option %q is %q (required: %q)", pin.ID, v, pin.Value)
		}
	}
	return ""
}

func quoteModes(ms []acp.SessionModeId) string {
	q := make([]string, len(ms))
	for i, m := range ms {
		q[i] = fmt.Sprintf("%q", m)
	}
	return strings.Join(q, ", ")
}
