package hardening

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/model"
)

// The verified profiles. docs/agents/hardening.md and each agent's page
// under docs/agents/ give the evidence for every entry;
// cmd/relay/realagents_test.go re-checks it against the pinned adapters in
// interop/.

// claudeReadOnlyTools are the only built-in tools a read_only Claude
// session has: none of them writes, edits, executes, fetches or acts on
// the host.
var claudeReadOnlyTools = []string{"Read", "Glob", "Grep"}

// claudeStateChangingTools are the built-in tools a state_changing Claude
// session has. Every one that writes, runs or fetches asks in mode default,
// and the relay denies every ask. An allowlist, not only disallowedTools:
// settings can switch on more tools through their env.
//
// Not Skill: a skill runs without asking, and a skill's allowed-tools
// pre-approve the tools it names (Claude Code bundles skills of its own).
var claudeStateChangingTools = []string{"Read", "Glob", "Grep", "Write", "Edit", "Bash", "NotebookEdit",
	"TodoWrite", "WebFetch", "WebSearch", "TaskOutput", "TaskStop"}

// claudeNeverTools act without asking in mode default (a git worktree and
// a branch, scheduled prompts, a switch to plan mode, which bypasses every
// check where bypass is available), start subagents or teams, or reach
// beyond the session: never offered, whatever the task mode.
//
// The Claude Code of claude-agent-acp 0.101 (Agent SDK 0.3.318) adds
// cross-session messaging (ListAgents, SendMessage: other Claude sessions
// on the machine), ScheduleWakeup and Workflow (later and further turns),
// Monitor (watches a command) and ReportFindings; most of its tools are
// deferred, loaded through ToolSearch.
var claudeNeverTools = []string{"Agent", "Task", "EnterPlanMode", "ExitPlanMode", "EnterWorktree", "ExitWorktree",
	"CronCreate", "CronDelete", "CronList", "RemoteTrigger", "TeamCreate", "TeamDelete", "SendMessage", "ListAgents",
	"TaskCreate", "TaskGet", "TaskUpdate", "TaskList", "LSP", "ToolSearch", "AskUserQuestion", "Config",
	"Brief", "Sleep", "PowerShell", "StructuredOutput", "ListMcpResourcesTool", "ReadMcpResourceTool",
	"ScheduleWakeup", "Workflow", "Monitor", "ReportFindings", "Skill"}

// claudeWriteTools write, edit, execute or fetch: never offered to a
// read_only session (on top of claudeNeverTools).
var claudeWriteTools = []string{"Bash", "Edit", "Write", "MultiEdit", "NotebookEdit", "WebFetch", "WebSearch",
	"TodoWrite", "Skill", "TaskOutput", "TaskStop", "KillShell", "BashOutput", "SlashCommand"}

// claudeOptions is session/new's _meta for claude-agent-acp: the adapter
// spreads _meta.claudeCode.options into the Claude Agent SDK's options.
// extra are more options.
func claudeOptions(tools, disallowed []string, extra map[string]any) map[string]any {
	opts := map[string]any{
		// Neither the user's nor the project's settings files: their allow
		// rules pre-approve tools, their hooks, apiKeyHelper and MCP
		// servers run code, and the task's cwd is chosen by the submitter,
		// who could plant them.
		"settingSources":  []string{},
		"tools":           tools,
		"disallowedTools": disallowed,
	}
	maps.Copy(opts, extra)
	return map[string]any{"claudeCode": map[string]any{"options": opts}}
}

// claudePreapprove adds the relay's MCP servers to allowedTools
// ("mcp__NAME" allows every tool of server NAME), the one SDK option the
// adapter passes on untouched.
func claudePreapprove(meta map[string]any, servers []string) map[string]any {
	cc, _ := meta["claudeCode"].(map[string]any)
	opts, _ := cc["options"].(map[string]any)
	allowed := make([]string, 0, len(servers))
	for _, n := range servers {
		allowed = append(allowed, "mcp__"+n)
	}
	out := maps.Clone(opts)
	out["allowedTools"] = allowed
	return map[string]any{"claudeCode": map[string]any{"options": out}}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// claudeRootSandbox: as root, claude-agent-acp turns bypass on for any
// non-empty IS_SANDBOX, and Claude Code then refuses to start unless it is
// exactly "1": the session fails with "Query closed before response
// received", and Claude's reason reaches no stderr. Such a value is
// removed; without IS_SANDBOX, root gets no bypass at all.
func claudeRootSandbox() ([]string, string) {
	if v := os.Getenv("IS_SANDBOX"); v != "" && v != "1" && os.Geteuid() == 0 {
		return []string{"IS_SANDBOX"}, fmt.Sprintf("IS_SANDBOX=%q: as root Claude Code accepts only 1 and would exit at session/new", v)
	}
	return nil, ""
}

// claudeVerify points Claude Code at the scripted model with a dummy API
// key, and takes away what would send it elsewhere: a token or an OAuth
// token of the user's, Bedrock, Vertex or Foundry, and its non-essential
// traffic (updates, telemetry, error reports).
var claudeVerify = &VerifySpec{
	Vocab: ToolVocab{Write: "Write", Read: "Read", Edit: "Edit", Shell: "Bash",
		Path: "file_path", Old: "old_string", New: "new_string"}, // Claude Code edits only a file it has read
	Redirect: func(to ScriptedModel, _ []string) (Launch, error) {
		return Launch{
			Env: []string{"ANTHROPIC_BASE_URL=" + to.URL, "ANTHROPIC_API_KEY=" + to.Key,
				"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
			Unset: []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
				"CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"},
		}, nil
	},
}

// claudeHome is what Claude Code needs of its user's home: its login
// (the credentials file, and the account state in .claude.json).
var claudeHome = []string{".claude.json", ".claude/.credentials.json"}

// codexHome is what Codex needs of its user's home: its config and login
// (in CODEX_HOME when the daemon's environment sets it).
var (
	codexHome     = []string{".codex/config.toml", ".codex/auth.json"}
	codexHomeVars = map[string]string{"CODEX_HOME": ".codex"}
)

// claudeRules are a claude-agent-acp generation's rules: readOnlyMode is
// the mode a read_only session is held in, extra are more session/new
// options of that generation.
func claudeRules(readOnlyMode acp.SessionModeId, readOnlySummary string, extra map[string]any) map[model.Mode]Rule {
	return map[model.Mode]Rule{
		// The adapter reads the starting mode from the settings files
		// itself (settingSources does not reach it), so a planted
		// defaultMode starts the session in acceptEdits or
		// bypassPermissions: the mode is always set, then checked.
		model.ModeReadOnly: {
			Meta:        claudeOptions(claudeReadOnlyTools, concat(claudeWriteTools, claudeNeverTools), extra),
			Unset:       claudeRootSandbox,
			Home:        claudeHome,
			SetMode:     readOnlyMode,
			AcceptModes: []acp.SessionModeId{readOnlyMode},
			Summary:     readOnlySummary,
		},
		model.ModeStateChanging: {
			Meta:        claudeOptions(claudeStateChangingTools, claudeNeverTools, extra),
			Preapprove:  claudePreapprove,
			Unset:       claudeRootSandbox,
			Home:        claudeHome,
			SetMode:     "default",
			AcceptModes: []acp.SessionModeId{"default"},
			Summary:     "no settings files; no plan/worktree/cron/subagent/messaging tools; mode default (every write and command asks, and the relay denies it)",
		},
	}
}

// claudeZed is @zed-industries/claude-agent-acp 0.23.x (frozen at 0.23.1;
// runs on Node 20).
var claudeZed = &Profile{
	Name:       "claude-agent-acp 0.23.x",
	Packages:   []string{"@zed-industries/claude-agent-acp"},
	Versions:   VersionRange{From: "0.23.0", Below: "0.24.0"},
	VerifiedOn: []string{"0.23.1"},
	Install:    "`npm install -g @zed-industries/claude-agent-acp@0.23.1` (Node 20)",
	Verify:     claudeVerify,
	Rules: claudeRules("dontAsk",
		"no settings files; built-in tools Read, Glob, Grep only; mode dontAsk (refuses what is not pre-approved)", nil),
}

// claudeACP is @agentclientprotocol/claude-agent-acp 0.101.x (Node 22).
// It has no dontAsk mode, and adds auto (a classifier approves actions
// without asking: never acceptable); it starts a session without a
// defaultMode in auto. A read_only session is held in default, where its
// only tools (Read, Glob, Grep) read, and a read the mode would ask for
// is denied. allowDangerouslySkipPermissions false takes bypassPermissions
// out of the session's modes.
var claudeACP = &Profile{
	Name:       "claude-agent-acp 0.101.x",
	Packages:   []string{"@agentclientprotocol/claude-agent-acp"},
	Versions:   VersionRange{From: "0.101.0", Below: "0.102.0"},
	VerifiedOn: []string{"0.101.0"},
	Install:    "`npm install -g @agentclientprotocol/claude-agent-acp@0.101` (Node 22)",
	Verify:     claudeVerify,
	Rules: claudeRules("default",
		"no settings files; built-in tools Read, Glob, Grep only; no bypass mode; mode default (whatever else would ask is denied)",
		map[string]any{"allowDangerouslySkipPermissions": false}),
}

// codexVocab: Codex writes and edits through its shell tool.
var codexVocab = ToolVocab{Shell: "exec_command", ShellArg: "cmd", ShellOnly: true}

// codexProvider is the loopback model provider a verification adds.
func codexProvider(url string) map[string]any {
	return map[string]any{"name": verifyProvider, "base_url": url + "/v1", "env_key": "RELAY_VERIFY_KEY", "wire_api": "responses"}
}

// codexACPVerify adds the loopback provider to CODEX_CONFIG, which
// codex-acp 2.x passes to the App Server as its model provider.
var codexACPVerify = &VerifySpec{
	Vocab: codexVocab,
	Redirect: func(to ScriptedModel, _ []string) (Launch, error) {
		return Launch{
			// A model Codex does not know: its classic function tools
			// (exec_command), whatever model the user's config names; the
			// sandbox that holds them is the one code mode's exec goes
			// through as well.
			EnvJSON: map[string]map[string]any{"CODEX_CONFIG": {"model_provider": verifyProvider, "model": verifyProvider + "-model",
				"model_providers": map[string]any{verifyProvider: codexProvider(to.URL)}}},
			Env: []string{"RELAY_VERIFY_KEY=" + to.Key},
		}, nil
	},
}

// codexZedVerify adds a loopback model provider with -c overrides (they
// outrank the user's config.toml, which stays in place) and selects it.
var codexZedVerify = &VerifySpec{
	Vocab: codexVocab,
	Redirect: func(to ScriptedModel, _ []string) (Launch, error) {
		return Launch{
			Args: []string{"-c", `model_provider="` + verifyProvider + `"`,
				"-c", `model_providers.` + verifyProvider + `={name="` + verifyProvider + `", base_url="` + to.URL +
					`/v1", env_key="RELAY_VERIFY_KEY", wire_api="responses"}`},
			Env: []string{"RELAY_VERIFY_KEY=" + to.Key},
		}, nil
	},
}

// codexRulesMasks hide Codex's exec-policy rules: they run the commands
// they allow outside the sandbox, and no override turns them off. The
// user's CODEX_HOME can be written by any process of theirs, so a check
// before the start would be a race: the directory is masked instead.
var codexRulesMasks = []Mask{{Dir: "$CODEX_HOME", Names: []string{"rules"}}, {Dir: "~/.codex", Names: []string{"rules"}}}

// codexZed is @zed-industries/codex-acp 0.16.x, a Rust adapter that
// reports itself as codex-acp (its Node launcher runs the native binary
// of a platform package).
var codexZed = &Profile{
	Name: "codex-acp 0.16.x",
	Packages: []string{"@zed-industries/codex-acp", "codex-acp", "@zed-industries/codex-acp-linux-x64",
		"@zed-industries/codex-acp-linux-arm64", "@zed-industries/codex-acp-darwin-x64", "@zed-industries/codex-acp-darwin-arm64"},
	Versions:   VersionRange{From: "0.16.0", Below: "0.17.0"},
	VerifiedOn: []string{"0.16.0"},
	Install:    "`npm install -g @zed-industries/codex-acp@0.16.0`",
	Verify:     codexZedVerify,
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			// -c overrides outrank the user's config.toml and a trusted
			// project's .codex/config.toml: the sandbox read-only, every
			// escalation asked of the relay (which denies it) rather than of
			// an automatic reviewer model, and no login-shell snapshot (it
			// runs the user's .bashrc outside the sandbox).
			Args: []string{"-c", `sandbox_mode="read-only"`, "-c", `approval_policy="on-request"`,
				"-c", `approvals_reviewer="user"`, "-c", "features.shell_snapshot=false"},
			Env:         []string{"NO_COLOR=1"},
			Masks:       codexRulesMasks,
			OwnSandbox:  true,
			Home:        codexHome,
			HomeVars:    codexHomeVars,
			SetMode:     "read-only",
			AcceptModes: []acp.SessionModeId{"read-only"},
			Summary:     "sandbox read-only with escalations asked of the relay (-c overrides), no shell snapshot, exec-policy rules masked, mode read-only",
		},
	},
}

// codexReadOnlyConfig is what @agentclientprotocol/codex-acp 2.x merges
// into every thread's config from CODEX_CONFIG (over the user's
// config.toml and a trusted project's): the same pins as 0.16's -c
// overrides. Its mode read-only sets the turn's sandbox and approval
// policy as well.
var codexReadOnlyConfig = map[string]any{
	"sandbox_mode": "read-only", "approval_policy": "on-request", "approvals_reviewer": "user",
	"features": map[string]any{"shell_snapshot": false},
}

// codexACPUnset: CODEX_PATH makes codex-acp 2.x run another Codex than
// the one it depends on, which no verification of the adapter covers.
func codexACPUnset() ([]string, string) {
	if os.Getenv("CODEX_PATH") != "" {
		return []string{"CODEX_PATH"}, "it picks another Codex binary than the adapter's own, which is what was verified"
	}
	return nil, ""
}

// codexACP is @agentclientprotocol/codex-acp 2.x, a TypeScript adapter
// over the Codex App Server (@openai/codex). It ignores -c arguments; it
// starts sessions in mode agent (auto review) unless INITIAL_AGENT_MODE
// says otherwise.
var codexACP = &Profile{
	Name:       "codex-acp 2.x",
	Packages:   []string{"@agentclientprotocol/codex-acp"},
	Versions:   VersionRange{From: "2.0.0", Below: "3.0.0"},
	VerifiedOn: []string{"2.6.0"},
	Install:    "`npm install -g @agentclientprotocol/codex-acp@2.6`",
	Verify:     codexACPVerify,
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			EnvJSON: map[string]map[string]any{"CODEX_CONFIG": codexReadOnlyConfig},
			Env:     []string{"INITIAL_AGENT_MODE=read-only", "NO_BROWSER=1", "NO_COLOR=1"},
			// Codex 0.166 snapshots the user's login shell, outside the
			// sandbox, at a session's first command (it sources ~/.profile
			// and ~/.bashrc), and neither CODEX_CONFIG's
			// features.shell_snapshot=false nor an App Server -c turns it
			// off: the session gets an empty HOME of its own, its
			// CODEX_HOME still the user's.
			HomeVars:    codexHomeVars,
			Unset:       codexACPUnset,
			Masks:       codexRulesMasks,
			OwnSandbox:  true,
			Home:        codexHome,
			SetMode:     "read-only",
			AcceptModes: []acp.SessionModeId{"read-only"},
			Summary:     "CODEX_CONFIG pins the sandbox read-only with escalations asked of the relay; an empty HOME of its own (no shell startup file of the user's runs); exec-policy rules masked; starts and stays in mode read-only",
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

// geminiVerify points Gemini CLI at the scripted model with a dummy API
// key. It never authenticates: Gemini's ACP authenticate removes the
// user's cached credentials and rewrites their settings. When the user's
// settings select another way to log in (Google login, Vertex AI, …),
// Gemini would use it and go to the network: the verification is refused
// instead.
var geminiVerify = &VerifySpec{
	Vocab: ToolVocab{Write: "write_file", Edit: "replace", Shell: "run_shell_command", Reader: "read_file",
		Path: "file_path", Old: "old_string", New: "new_string", EditExtra: map[string]any{"instruction": "change it"}},
	Redirect: func(to ScriptedModel, _ []string) (Launch, error) {
		return Launch{
			Env: []string{"GOOGLE_GEMINI_BASE_URL=" + to.URL, "GEMINI_API_KEY=" + to.Key},
			Unset: []string{"GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA",
				"GOOGLE_CLOUD_ACCESS_TOKEN"},
		}, nil
	},
	Refuse: geminiAuthRefusal,
}

// geminiOfflineAuth are the auth types under which Gemini CLI talks to
// GOOGLE_GEMINI_BASE_URL with GEMINI_API_KEY.
var geminiOfflineAuth = []string{"gemini-api-key", "gateway"}

// geminiAuthRefusal returns why Gemini CLI, with the settings on this
// machine, would not use the scripted model, or "".
func geminiAuthRefusal() string {
	var files []string
	if p := os.Getenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH"); p != "" {
		files = append(files, p)
	} else {
		files = append(files, "/etc/gemini-cli/settings.json")
	}
	if h := os.Getenv("GEMINI_CLI_HOME"); h != "" {
		files = append(files, filepath.Join(h, "settings.json"), filepath.Join(h, ".gemini", "settings.json"))
	}
	if p, ok := expandPath("~/.gemini/settings.json"); ok {
		files = append(files, p)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Sprintf("%s cannot be read (%v), so the auth type Gemini would use is unknown", f, err)
		}
		var st struct {
			Security struct {
				Auth struct {
					SelectedType string `json:"selectedType"`
				} `json:"auth"`
			} `json:"security"`
			SelectedAuthType string `json:"selectedAuthType"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Sprintf("%s is not plain JSON (%v), so the auth type Gemini would use is unknown", f, err)
		}
		for _, t := range []string{st.Security.Auth.SelectedType, st.SelectedAuthType} {
			if t != "" && !slices.Contains(geminiOfflineAuth, t) {
				return fmt.Sprintf("%s selects auth type %q: Gemini would use that login and go to the network "+
					"(only %s are redirected to a local model)", f, t, strings.Join(geminiOfflineAuth, " and "))
			}
		}
	}
	return ""
}

var geminiProfile = &Profile{
	Name:       "gemini-cli 0.61+",
	Packages:   []string{"@google/gemini-cli", "gemini-cli"},
	Versions:   VersionRange{From: "0.61.0", Below: "1.0.0"},
	VerifiedOn: []string{"0.61.0"},
	Install:    "`npm install -g @google/gemini-cli@0.61.0`",
	Verify:     geminiVerify,
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
			// Its settings (the auth type chosen) and its login.
			Home: []string{".gemini/settings.json", ".gemini/oauth_creds.json", ".gemini/google_accounts.json",
				".gemini/installation_id", ".gemini/user_id", ".gemini/.env"},
			Summary: "untrusted workspace, admin policy offering only read tools, mode plan",
		},
	},
}

// opencodePermissions denies every tool that writes, runs, fetches,
// starts a subagent or changes the mode, and allows the read tools. "*"
// comes first: OpenCode evaluates rules in key order, last match wins, and
// its config merge keeps a key where the first config that set it put it.
const opencodePermissions = `{"*":"deny","read":"allow","glob":"allow","grep":"allow","list":"allow","lsp":"allow",` +
	`"edit":"deny","write":"deny","apply_patch":"deny","bash":"deny","task":"deny","external_directory":"deny",` +
	`"todowrite":"deny","question":"deny","webfetch":"deny","websearch":"deny","codesearch":"deny","skill":"deny",` +
	`"doom_loop":"deny","plan_enter":"deny","plan_exit":"deny"}`

// opencodeConfig is injected as OPENCODE_CONFIG_CONTENT, above every
// configuration file: the permissions above, globally and for every
// built-in agent, and a primary agent of the relay's own whose name is made
// for each session ({nonce}), so that no planted or user config can hold
// rules of its own for it that sort after the relay's.
const opencodeConfig = `{"permission":` + opencodePermissions + `,"agent":{` +
	`"build":{"permission":` + opencodePermissions + `},` +
	`"plan":{"permission":` + opencodePermissions + `},` +
	`"general":{"permission":` + opencodePermissions + `},` +
	`"explore":{"permission":` + opencodePermissions + `},` +
	`"compaction":{"permission":` + opencodePermissions + `},` +
	`"title":{"permission":` + opencodePermissions + `},` +
	`"summary":{"permission":` + opencodePermissions + `},` +
	`"{nonce}":{"mode":"primary","description":"HAI-Relay read_only task","permission":` + opencodePermissions + `}},` +
	`"lsp":false,"formatter":false}`

// opencodeVerify adds a loopback provider to the rule's inline config
// (OPENCODE_CONFIG_CONTENT, above every config file) and makes it the
// model, and turns off what OpenCode fetches at start.
var opencodeVerify = &VerifySpec{
	Vocab: ToolVocab{Write: "write", Read: "read", Edit: "edit", Shell: "bash",
		Path: "filePath", Old: "oldString", New: "newString"},
	Redirect: func(to ScriptedModel, ruleEnv []string) (Launch, error) {
		content, _ := EnvValue(ruleEnv, "OPENCODE_CONFIG_CONTENT")
		provider := map[string]any{verifyProvider: map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "HAI-Relay verification",
			"options": map[string]any{"baseURL": to.URL + "/v1", "apiKey": to.Key},
			"models":  map[string]any{"m": map[string]any{"name": "scripted", "tool_call": true}},
		}}
		merged, err := addJSONKeys(content, []string{"provider", "model", "small_model"},
			[]any{provider, verifyProvider + "/m", verifyProvider + "/m"})
		if err != nil {
			return Launch{}, fmt.Errorf("OPENCODE_CONFIG_CONTENT: %w", err)
		}
		return Launch{Env: []string{"OPENCODE_CONFIG_CONTENT=" + merged, "OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_SHARE=1"}}, nil
	},
}

var opencodeProfile = &Profile{
	Name:       "opencode 1.x",
	Packages:   []string{"opencode-ai", "OpenCode"},
	Versions:   VersionRange{From: "1.18.0", Below: "2.0.0"},
	VerifiedOn: []string{"1.18.33"},
	Install:    "`npm install -g opencode-ai@1.18.33`",
	Verify:     opencodeVerify,
	Rules: map[model.Mode]Rule{
		model.ModeReadOnly: {
			// Project config (opencode.json, .opencode/ agents, tools, MCP
			// servers) is off: the submitter picks the cwd.
			Env: []string{"OPENCODE_CONFIG_CONTENT=" + opencodeConfig, "OPENCODE_DISABLE_PROJECT_CONFIG=1",
				"OPENCODE_DISABLE_AUTOUPDATE=1"},
			Options: []OptionPin{{ID: "mode", Value: nonceMark}},
			// Plugins in a .opencode directory of the cwd or above, or in
			// the global config directory, are loaded, and run, whatever
			// the configuration says (OpenCode globs {plugin,plugins}/*.{ts,js}
			// in every config directory it finds; OPENCODE_PURE and
			// OPENCODE_DISABLE_PROJECT_CONFIG do not skip them): hidden.
			Masks: []Mask{{Dir: "{cwd}", Names: []string{".opencode", "opencode.json", "opencode.jsonc"}},
				{Dir: "$XDG_CONFIG_HOME/opencode", Names: []string{"plugin", "plugins"}},
				{Dir: "~/.config/opencode", Names: []string{"plugin", "plugins"}}},
			// Its login, and its config directory, which it writes at
			// every start (a .gitignore, its plugin package): a copy, but
			// the plugins, in its own home.
			Home:     []string{".local/share/opencode/auth.json", ".config/opencode"},
			HomeVars: map[string]string{"XDG_CONFIG_HOME": ".config"},
			Summary:  "inline config denying every write, command, fetch and subagent for every agent; project config off and .opencode, opencode.json and plugins masked; a per-session read-only agent (config option mode)",
		},
	},
}
