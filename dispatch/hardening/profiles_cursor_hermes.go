package hardening

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/model"
)

// The Cursor and Hermes profiles. Neither agent installs on the machines
// the relay is built on (Cursor's CLI is a binary from its own site,
// Hermes a Python package), so, unlike the other profiles, these were not
// run against the real agents: they follow the agents' public docs and
// source (docs/agents/cursor.md and hermes.md), and CI proves their
// mechanics with scripted stand-ins that behave as those docs say
// (cmd/testfakes/fakeagent, standins.go). `relay agents verify hermes`
// checks the real Hermes on the user's machine; Cursor's model cannot be
// pointed at a local server, so `relay agents verify cursor` runs only the
// checks that need no model and says so.

// OwnDir is a directory of the session's own (Rule.OwnDir): made fresh,
// 0700, before the agent starts, filled with Files, pointed at by Var, and
// removed when the session ends. Nothing of the user's is in it, and
// nothing the agent writes there outlives the session. Under the relay's
// sandbox it is already per-task: it is bound writable as it is.
type OwnDir struct {
	// Var is the variable that points the agent at the directory.
	Var string
	// Files returns the files to write there (name → content, 0600),
	// given the agent's environment before Var is set (the daemon's, the
	// rule's and a verification's redirect).
	Files func(env []string) (map[string]string, error)
}

// refusedAdapters are adapters no profile will ever cover, by package or
// agentInfo name, with why.
var refusedAdapters = map[string]string{
	"@blowmage/cursor-agent-acp": "it runs `cursor-agent --print --force`, which allows every tool call that is not denied, " +
		"so no permission request would ever reach the relay; run Cursor's own `agent acp` instead",
	"cursor-agent-acp": "it is @blowmage/cursor-agent-acp, which runs `cursor-agent --print --force` (every tool call allowed " +
		"unless denied); run Cursor's own `agent acp` instead",
}

// cursorDeny are the permission tokens of Cursor's cli-config.json that
// the relay's config denies: every write (a relative glob is scoped to the
// workspace, so absolute paths too), every shell command, every fetch and
// every MCP tool.
var cursorDeny = []string{"Write(**)", "Write(/**)", "Shell(*)", "Shell(*:*)", "WebFetch(*)", "Mcp(*:*)"}

// cursorCLIConfig is the cli-config.json the relay writes into a Cursor
// session's own CURSOR_CONFIG_DIR: approvalMode allowlist with nothing
// allowed (it asks for shell, and the relay denies), and the deny list.
// Writes in allowlist mode run without asking; the mode plan stops them.
func cursorCLIConfig() string {
	b, _ := json.MarshalIndent(map[string]any{
		"version": 1, "editor": map[string]any{"vimMode": false}, "approvalMode": "allowlist",
		"permissions": map[string]any{"allow": []string{}, "deny": cursorDeny},
	}, "", "  ")
	return string(b) + "\n"
}

func cursorFiles([]string) (map[string]string, error) {
	return map[string]string{"cli-config.json": cursorCLIConfig()}, nil
}

// cursorConfigCheck checks the cli-config.json the relay writes: what
// `relay agents verify cursor` can check without Cursor's model.
func cursorConfigCheck() OfflineCheck {
	c := OfflineCheck{Name: "the relay's cli-config.json"}
	var cfg struct {
		ApprovalMode string `json:"approvalMode"`
		Permissions  struct {
			Allow []string `json:"allow"`
			Deny  []string `json:"deny"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(cursorCLIConfig()), &cfg); err != nil {
		c.Detail = "not JSON: " + err.Error()
		return c
	}
	var missing []string
	for _, d := range cursorDeny {
		if !slices.Contains(cfg.Permissions.Deny, d) {
			missing = append(missing, d)
		}
	}
	switch {
	case cfg.ApprovalMode != "allowlist":
		c.Detail = fmt.Sprintf("approvalMode %q, not allowlist", cfg.ApprovalMode)
	case len(cfg.Permissions.Allow) > 0:
		c.Detail = "it allows " + strings.Join(cfg.Permissions.Allow, ", ")
	case len(missing) > 0:
		c.Detail = "it does not deny " + strings.Join(missing, ", ")
	default:
		c.Passed, c.Detail = true, "approvalMode allowlist, nothing allowed, denies "+strings.Join(cursorDeny, " ")
	}
	return c
}

// masksCheck checks that the masks a profile names can be applied here.
func masksCheck() OfflineCheck {
	c := OfflineCheck{Name: "masks (.cursor, .claude in the cwd and above)"}
	if p, err := exec.LookPath("bwrap"); err != nil {
		c.Detail = "bubblewrap (bwrap) not found: every session would fail to start"
	} else {
		c.Passed, c.Detail = true, "bubblewrap found at "+p
	}
	return c
}

var cursorVerify = &VerifySpec{
	// Only the positive control's tool is named: no attempt is scripted.
	Vocab:   ToolVocab{Write: "Write", Read: "Read", Edit: "Edit", Shell: "Shell"},
	NoModel: "Cursor's model cannot be redirected to a local server (it talks only to Cursor's own backend)",
	Offline: func() []OfflineCheck { return []OfflineCheck{cursorConfigCheck(), masksCheck()} },
}

// cursorProfile is Cursor's own `agent acp` (older `cursor-agent acp`), a
// native binary with no package.json, whose agentInfo name is not
// documented: it is launched under this profile and confirmed at
// initialize by its version (Cursor's are dates, 2025.08.25-896bbe1; an
// npm adapter's are not), and a known wrapper is refused by name.
var cursorProfile = &Profile{
	Name:       "cursor-agent 2025+",
	Packages:   []string{"cursor-agent"},
	AnyName:    true,
	Versions:   VersionRange{From: "2025.1.0"},
	VerifiedOn: []string{"no release (scripted stand-in only)"},
	Install:    "Cursor's own CLI (`curl https://cursor.com/install -fsS | bash`), run as `agent acp`",
	Verify:     cursorVerify,
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			// The user's ~/.cursor/cli-config.json (approvalMode
			// unrestricted, allow rules) is never read: the session has a
			// config directory of its own. Under ACP --mode and
			// --allowed-tools are ignored; the config and the mode hold.
			OwnDir: &OwnDir{Var: "CURSOR_CONFIG_DIR", Files: cursorFiles},
			// A project's .cursor/cli.json overrides permissions (merged
			// from the git root down), .cursor/ holds its MCP servers,
			// hooks and rules, and Cursor loads Claude Code's hooks too:
			// hidden in the cwd and every directory above it (the home
			// directory's ~/.cursor and ~/.claude among them).
			Masks: []Mask{{Dir: "{cwd}", Names: []string{".cursor", ".claude"}}},
			// Cursor keeps its chats and project state under ~/.cursor.
			SetMode:     "plan",
			AcceptModes: []acp.SessionModeId{"plan", "ask"},
			Summary: "a config directory of its own (approvalMode allowlist, Write, Shell, WebFetch and MCP denied); " +
				".cursor and .claude masked; mode plan (no edits; a command asks, and the relay denies it); " +
				"Cursor's own requests (cursor/ask_question, ...) declined",
		},
	},
}

// hermesModel is the part of a Hermes config.yaml the relay carries over:
// the model provider and model, and a custom endpoint's base URL.
type hermesModel struct {
	Provider, Default, BaseURL string
}

// hermesVerifyURLVar is how a verification tells the config writer the
// scripted model's base URL (Hermes takes its model from config.yaml).
const hermesVerifyURLVar = "HAI_RELAY_VERIFY_BASE_URL"

// hermesFiles returns the config.yaml of a Hermes session's own
// HERMES_HOME: the user's model settings (from $HERMES_HOME/config.yaml,
// else ~/.hermes/config.yaml, as the daemon's environment has them) and
// approvals manual; nothing else (no MCP servers, skills, memories,
// credentials or .env).
func hermesFiles(env []string) (map[string]string, error) {
	var m hermesModel
	if url, ok := EnvValue(env, hermesVerifyURLVar); ok && url != "" {
		m = hermesModel{Provider: "custom", Default: verifyProvider + "-model", BaseURL: url}
	} else {
		var err error
		if m, err = userHermesModel(env); err != nil {
			return nil, err
		}
	}
	return map[string]string{"config.yaml": hermesConfig(m)}, nil
}

// userHermesModel reads the model settings of the user's Hermes config.
func userHermesModel(env []string) (hermesModel, error) {
	get := func(k string) string {
		if v, ok := EnvValue(env, k); ok {
			return v
		}
		return os.Getenv(k)
	}
	var path string
	switch {
	case get("HERMES_HOME") != "":
		path = filepath.Join(get("HERMES_HOME"), "config.yaml")
	case get("HOME") != "":
		path = filepath.Join(get("HOME"), ".hermes", "config.yaml")
	default:
		return hermesModel{}, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return hermesModel{}, nil
	}
	if err != nil {
		return hermesModel{}, err
	}
	m, err := parseHermesModel(string(b))
	if err != nil {
		return hermesModel{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// hermesConfig is the config.yaml the relay writes for a Hermes session.
// Strings are written as JSON strings, which YAML reads as double-quoted
// scalars.
func hermesConfig(m hermesModel) string {
	var b strings.Builder
	b.WriteString("# Written by HAI-Relay for one session: the model settings of your Hermes config, and nothing else.\n")
	if m != (hermesModel{}) {
		b.WriteString("model:\n")
		for _, kv := range [][2]string{{"provider", m.Provider}, {"default", m.Default}, {"base_url", m.BaseURL}} {
			if kv[1] != "" {
				q, _ := json.Marshal(kv[1])
				fmt.Fprintf(&b, "  %s: %s\n", kv[0], q)
			}
		}
	}
	b.WriteString("approvals:\n  mode: manual\n")
	return b.String()
}

// parseHermesModel reads model.provider, model.default (or model.name) and
// model.base_url from a Hermes config.yaml, or a model given as one
// string; nothing else of the file is read. It understands block
// mappings of plain, single- or double-quoted scalars; any other form of
// the model section is an error, never a guess.
func parseHermesModel(text string) (hermesModel, error) {
	var m hermesModel
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		rest, ok := strings.CutPrefix(lines[i], "model:")
		if !ok {
			continue
		}
		if v := stripYAMLComment(rest); v != "" {
			s, err := yamlScalar(v)
			if err != nil {
				return m, fmt.Errorf("model: %w", err)
			}
			return hermesModel{Default: s}, nil
		}
		indent := -1
		for _, l := range lines[i+1:] {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			n := len(l) - len(strings.TrimLeft(l, " "))
			if n == 0 {
				break // the next top-level key
			}
			if strings.HasPrefix(strings.TrimLeft(l, " "), "\t") {
				return m, errors.New("model: tab indentation")
			}
			if indent < 0 {
				indent = n
			}
			if n != indent {
				continue // inside a nested value
			}
			key, val, ok := strings.Cut(t, ":")
			if !ok {
				return m, fmt.Errorf("model: %q is not a key: value line", t)
			}
			var dst *string
			switch key {
			case "provider":
				dst = &m.Provider
			case "default", "name":
				if key == "name" && m.Default != "" {
					continue
				}
				dst = &m.Default
			case "base_url":
				dst = &m.BaseURL
			default:
				continue
			}
			s, err := yamlScalar(stripYAMLComment(val))
			if err != nil {
				return m, fmt.Errorf("model.%s: %w", key, err)
			}
			*dst = s
		}
		return m, nil
	}
	return m, nil
}

// stripYAMLComment trims s and removes a trailing comment from a plain or
// quoted scalar.
func stripYAMLComment(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "'") {
		q := s[0]
		for i := 1; i < len(s); i++ {
			switch {
			case q == '"' && s[i] == '\\':
				i++
			case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
				i++
			case s[i] == q:
				return s[:i+1]
			}
		}
		return s
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// yamlScalar decodes a plain, single- or double-quoted YAML scalar on one
// line; flow collections, anchors, aliases, tags and block scalars are
// errors.
func yamlScalar(s string) (string, error) {
	switch {
	case s == "" || s == "~" || s == "null":
		return "", nil
	case strings.HasPrefix(s, `"`):
		var out string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			return "", fmt.Errorf("a double-quoted value the relay does not read: %s", s)
		}
		return out, nil
	case strings.HasPrefix(s, "'"):
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return "", fmt.Errorf("an unterminated quoted value: %s", s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case strings.ContainsAny(s[:1], "{[&*!|>%@`"):
		return "", fmt.Errorf("a YAML form the relay does not read (%s): write it as key: value lines", s)
	}
	return s, nil
}

// hermesUnset: project plugins (./.hermes/plugins) load only with this
// variable, and they run code; it never reaches Hermes.
func hermesUnset() ([]string, string) {
	return []string{"HERMES_ENABLE_PROJECT_PLUGINS"}, "never passed: it makes Hermes load and run the project's own plugins"
}

// hermesVerify points Hermes at the scripted model: its config.yaml gets
// a custom OpenAI-compatible provider whose base_url is the scripted
// model's (chat completions), its key in the environment.
var hermesVerify = &VerifySpec{
	Vocab: ToolVocab{Write: "write_file", Read: "read_file", Edit: "patch", Shell: "terminal",
		Path: "path", Old: "old_string", New: "new_string", EditExtra: map[string]any{"mode": "replace"}},
	Redirect: func(to ScriptedModel, _ []string) (Launch, error) {
		return Launch{Env: []string{hermesVerifyURLVar + "=" + to.URL + "/v1", "OPENAI_API_KEY=" + to.Key,
			"OPENAI_BASE_URL=" + to.URL + "/v1"}}, nil
	},
}

// hermesProfile is Hermes Agent's `hermes acp` (NousResearch/hermes-agent,
// a Python package; it reports agentInfo hermes-agent).
var hermesProfile = &Profile{
	Name:       "hermes-agent 0.x",
	Packages:   []string{"hermes-agent"},
	Versions:   VersionRange{From: "0.21.0", Below: "1.0.0"},
	VerifiedOn: []string{"no release (scripted stand-in only)"},
	Install:    "`pip install hermes-agent` (or its installer), run as `hermes acp`",
	Verify:     hermesVerify,
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			// A HERMES_HOME of the session's own: no .env, MCP servers,
			// skills, memories or state of the user's; what Hermes writes
			// there (memories, skills, its database) is removed with it.
			OwnDir: &OwnDir{Var: "HERMES_HOME", Files: hermesFiles},
			// execute_code asks (it ran without asking under ACP);
			// configured MCP servers are not started.
			Env:   []string{"HERMES_EXEC_ASK=1", "HERMES_ACP_SKIP_CONFIGURED_MCP=1"},
			Unset: hermesUnset,
			// Project plugins and config: hidden in the cwd and above.
			Masks:       []Mask{{Dir: "{cwd}", Names: []string{".hermes"}}},
			SetMode:     "plan",
			AcceptModes: []acp.SessionModeId{"plan"},
			Summary: "a HERMES_HOME of its own holding only your model settings and approvals manual; execute_code asks; " +
				"no configured MCP servers; no project plugins (.hermes masked); mode plan (no writes or commands)",
		},
	},
}
