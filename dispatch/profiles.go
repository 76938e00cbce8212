package dispatch

import (
	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/model"
)

// The verified profiles. docs/agents.md ("Hardening profiles") gives the
// evidence for every entry; cmd/relay/realagents_test.go re-checks it
// against the pinned adapters in interop/.

// claudeReadOnlyTools are the only built-in tools a read_only Claude
// session has: none of them writes, edits, executes, fetches or acts on
// the host.
var claudeReadOnlyTools = []string{"Read", "Glob", "Grep"}

// claudeHostTools act on the host without asking in Claude's default mode
// (a git worktree and a branch, scheduled prompts): never offered.
var claudeHostTools = []string{"EnterWorktree", "ExitWorktree", "CronCreate", "CronDelete", "CronList"}

// claudeWriteTools write, edit, execute, fetch, or start work that can:
// never offered to a read_only session.
var claudeWriteTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "BashOutput", "KillShell",
	"WebFetch", "WebSearch", "Task", "Agent", "Skill", "SlashCommand", "ExitPlanMode", "EnterPlanMode", "TodoWrite"}

func claudeOptions(extra map[string]any) map[string]any {
	opts := map[string]any{
		// Neither the user's nor the project's settings files: their allow
		// rules would pre-approve tools, and the task's cwd is chosen by
		// the submitter, who could plant them.
		"settingSources": []string{},
	}
	for k, v := range extra {
		opts[k] = v
	}
	return map[string]any{"claudeCode": map[string]any{"options": opts}}
}

var claudeProfile = &Profile{
	Name:       "claude-agent-acp",
	VerifiedOn: []string{"0.23.1"},
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			Meta: claudeOptions(map[string]any{
				"tools":           claudeReadOnlyTools,
				"disallowedTools": append(append([]string(nil), claudeWriteTools...), claudeHostTools...),
			}),
			SetMode:     "default",
			AcceptModes: []acp.SessionModeId{"default"},
			Summary:     "no settings files, built-in tools Read/Glob/Grep only, mode default (asks; every ask denied)",
		},
		model.ModeStateChanging: {
			Meta: claudeOptions(map[string]any{
				"disallowedTools": claudeHostTools,
			}),
			SetMode:     "default",
			AcceptModes: []acp.SessionModeId{"default"},
			Summary:     "no settings files, no worktree/cron tools, mode default (every write and exec asks and is denied)",
		},
	},
}

var codexProfile = &Profile{
	Name:       "codex-acp",
	VerifiedOn: []string{"0.16.0"},
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			SetMode:     "read-only",
			AcceptModes: []acp.SessionModeId{"read-only"},
			Summary:     "mode read-only (Codex's sandbox blocks writes and commands' writes)",
		},
	},
}

// geminiReadOnlyPolicy is an admin-tier policy (it outranks the user's
// tools.allowed, "always allow" and user policies): every tool denied but
// the read-only ones, which are all the model is then offered.
const geminiReadOnlyPolicy = `# Written by HAI-Relay for read_only tasks (gemini --admin-policy).
[[rule]]
toolName = "*"
decision = "deny"
priority = 100
denyMessage = "HAI-Relay read_only task: this tool is not allowed."

[[rule]]
toolName = ["read_file", "read_many_files", "glob", "grep_search", "list_directory"]
decision = "allow"
priority = 200
`

var geminiProfile = &Profile{
	Name:       "gemini-cli",
	VerifiedOn: []string{"0.61.0"},
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			// An untrusted workspace: the cwd's .gemini/settings.json (tools.allowed,
			// an approval mode, a plans directory, policies, hooks, MCP
			// servers), which the submitter could plant, is ignored, and so
			// are the user's hooks and MCP servers. One process (no relaunch),
			// so that signals reach it.
			Env:  []string{"GEMINI_CLI_TRUST_WORKSPACE=false", "GEMINI_CLI_NO_RELAUNCH=true"},
			Args: []string{"--admin-policy", "{dir}/gemini-read-only.toml"},
			Files: map[string]string{
				"gemini-read-only.toml": geminiReadOnlyPolicy,
			},
			// A system policy directory makes gemini ignore --admin-policy.
			RefuseIfExists: []string{"/etc/gemini-cli/policies/*.toml"},
			SetMode:        "plan",
			AcceptModes:    []acp.SessionModeId{"plan"},
			// Gemini CLI reports mode changes as message text, never as
			// current_mode_update.
			ModeText: "[MODE_UPDATE] ",
			Summary:  "untrusted workspace, admin policy offering only read tools, mode plan",
		},
	},
}

// opencodeDenyConfig is injected as OPENCODE_CONFIG_CONTENT, the highest
// precedence of OpenCode's configuration: it denies every tool that
// writes, runs or fetches, globally and for every built-in agent, whatever
// an opencode.json planted in the cwd says.
const opencodeDenyConfig = `{"permission":{"edit":"deny","bash":"deny","webfetch":"deny","websearch":"deny","task":"deny","external_directory":"deny"},` +
	`"agent":{"build":{"permission":{"edit":"deny","bash":"deny","webfetch":"deny","websearch":"deny","task":"deny","external_directory":"deny"}},` +
	`"plan":{"permission":{"edit":"deny","bash":"deny","webfetch":"deny","websearch":"deny","task":"deny","external_directory":"deny"}},` +
	`"general":{"permission":{"edit":"deny","bash":"deny","webfetch":"deny","websearch":"deny","task":"deny","external_directory":"deny"}},` +
	`"explore":{"permission":{"edit":"deny","bash":"deny","webfetch":"deny","websearch":"deny","task":"deny","external_directory":"deny"}}}}`

var opencodeProfile = &Profile{
	Name:       "opencode",
	VerifiedOn: []string{"1.18.33"},
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			Env:     []string{"OPENCODE_CONFIG_CONTENT=" + opencodeDenyConfig},
			Options: []OptionPin{{ID: "mode", Value: "plan"}},
			Summary: "agent plan (config option mode), edit/bash/webfetch/task denied by inline config",
		},
	},
}
