package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/model"
)

// docLaunchSpecs is the table of default launch specs in docs/agents.md, written out
// here as the independent source DefaultConfig is checked against.
var docLaunchSpecs = map[string][]string{
	"claude":   {"claude-agent-acp"},
	"codex":    {"codex-acp"},
	"gemini":   {"gemini", "--acp"},
	"opencode": {"opencode", "acp"},
	"cursor":   {"agent", "acp"},
	"hermes":   {"hermes", "acp"},
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	c := config.DefaultConfig()

	core := slices.Sorted(slices.Values(model.CoreAgents()))
	if got := c.AgentNames(); !slices.Equal(got, core) {
		t.Fatalf("AgentNames() = %v, want the core agents %v", got, core)
	}
	if len(docLaunchSpecs) != len(core) {
		t.Fatalf("docs/agents.md lists %d launch specs, model.CoreAgents() %d", len(docLaunchSpecs), len(core))
	}
	for name, want := range docLaunchSpecs {
		a, ok := c.Agent(name)
		if !ok {
			t.Errorf("agent %s missing from the defaults", name)
			continue
		}
		if !slices.Equal(a.Command, want) {
			t.Errorf("agent %s command = %q, want %q (the launch specs (docs/agents.md))", name, a.Command, want)
		}
		if !a.Enabled {
			t.Errorf("agent %s is disabled by default; the core agents are enabled in v1", name)
		}
	}

	want := config.Config{
		Authority: config.AuthorityConfig{Command: nil, Timeout: 5 * time.Second},
		Agents:    c.Agents,
		Limits: config.LimitsConfig{
			MessageBytes:     262144,
			TaskTimeout:      30 * time.Minute,
			StartTimeout:     60 * time.Second,
			ProbeTimeout:     60 * time.Second,
			MaxDispatch:      4,
			InboxMessages:    1000,
			InboxBytes:       64 << 20,
			InboxSenderShare: 25,

			MaxDelegationDepth: 3,
		},
		Storage:   config.StorageConfig{Synchronous: "FULL", MinFreeBytes: 64 << 20},
		Retention: config.RetentionConfig{AckedMessages: 30 * 24 * time.Hour, TerminalTasks: 90 * 24 * time.Hour, Audit: 365 * 24 * time.Hour},
		Daemon:    config.DaemonConfig{IdleTimeout: 10 * time.Minute},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("DefaultConfig() =\n%+v\nwant\n%+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}

	// Each call is a fresh value: changing one does not change the next.
	c.Agents["claude"].Command[0] = "changed"
	c.Agents["extra"] = config.AgentConfig{}
	c2 := config.DefaultConfig()
	if c2.Agents["claude"].Command[0] != "claude-agent-acp" || len(c2.Agents) != len(core) {
		t.Errorf("DefaultConfig shares state between calls: %+v", c2.Agents)
	}
}

func TestConfigAgent(t *testing.T) {
	t.Parallel()
	c := config.DefaultConfig()
	a, ok := c.Agent("gemini")
	if !ok || !slices.Equal(a.Command, []string{"gemini", "--acp"}) {
		t.Fatalf("Agent(gemini) = %+v, %v", a, ok)
	}
	a.Command[0] = "changed"
	if c.Agents["gemini"].Command[0] != "gemini" {
		t.Error("Agent returned the config's own command slice")
	}
	if _, ok := c.Agent("nobody"); ok {
		t.Error("Agent(nobody) ok = true")
	}
	if _, ok := c.Agent(model.RelayAgent); ok {
		t.Error("Agent(relay) ok = true")
	}
}

const fullConfig = `# every key, and a custom agent
[authority]
command = ["hai-authority", "--relay", ""]
timeout = "2s"

[agents.claude]
command = ["/opt/claude/bin/claude-agent-acp", "--verbose"]
enabled = true

[agents.gemini]
enabled = false
require_verified = true
verified_within = "168h"

[agents.my-agent_2]
command = ["my-agent-acp"]

[agents.off]
command = ["/usr/local/bin/My Agent/acp"]   # a path with a space is fine
enabled = false

[limits]
message_bytes = 1024
task_timeout = "1h30m"
probe_timeout = "15s"
start_timeout = "20s"
max_dispatch = 16
max_dispatch_per_caller = 5
max_delegation_depth = 1    # no delegation from inside a task
inbox_messages = 0          # no limit
inbox_bytes = 1048576

[storage]
synchronous = "NORMAL"
min_free_bytes = 0

[retention]
acked_messages = "0"        # keep forever
terminal_tasks = "168h"

[daemon]
idle_timeout = "90s"
`

func TestParseConfigFull(t *testing.T) {
	t.Parallel()
	c, err := config.ParseConfig([]byte(fullConfig), "config.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultConfig()
	want.Authority = config.AuthorityConfig{Command: []string{"hai-authority", "--relay", ""}, Timeout: 2 * time.Second}
	want.Agents["claude"] = config.AgentConfig{Command: []string{"/opt/claude/bin/claude-agent-acp", "--verbose"}, Enabled: true, EnabledSet: true, VerifiedWithin: config.DefaultVerifiedWithin}
	want.Agents["gemini"] = config.AgentConfig{Command: []string{"gemini", "--acp"}, Enabled: false, EnabledSet: true, RequireVerified: true, VerifiedWithin: 168 * time.Hour}
	want.Agents["my-agent_2"] = config.AgentConfig{Command: []string{"my-agent-acp"}, Enabled: true, VerifiedWithin: config.DefaultVerifiedWithin}
	want.Agents["off"] = config.AgentConfig{Command: []string{"/usr/local/bin/My Agent/acp"}, Enabled: false, EnabledSet: true, VerifiedWithin: config.DefaultVerifiedWithin}
	want.Limits = config.LimitsConfig{MessageBytes: 1024, TaskTimeout: 90 * time.Minute, ProbeTimeout: 15 * time.Second, StartTimeout: 20 * time.Second,
		MaxDispatch: 16, MaxDispatchPerCaller: 5, InboxMessages: 0, InboxBytes: 1 << 20, InboxSenderShare: 25, MaxDelegationDepth: 1}
	want.Storage = config.StorageConfig{Synchronous: config.SynchronousNormal, MinFreeBytes: 0}
	want.Retention = config.RetentionConfig{AckedMessages: 0, TerminalTasks: 168 * time.Hour, Audit: 365 * 24 * time.Hour}
	want.Daemon.IdleTimeout = 90 * time.Second
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ParseConfig =\n%+v\nwant\n%+v", c, want)
	}
	wantNames := []string{"claude", "codex", "cursor", "gemini", "hermes", "my-agent_2", "off", "opencode"}
	if got := c.AgentNames(); !slices.Equal(got, wantNames) {
		t.Errorf("AgentNames() = %v, want %v", got, wantNames)
	}
}

func TestParseConfigEmpty(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "\n", "# only a comment\n", "[authority]\n[limits]\n[storage]\n[agents]\n"} {
		c, err := config.ParseConfig([]byte(doc), "config.toml")
		if err != nil {
			t.Errorf("ParseConfig(%q): %v", doc, err)
			continue
		}
		if !reflect.DeepEqual(c, config.DefaultConfig()) {
			t.Errorf("ParseConfig(%q) = %+v, want the defaults", doc, c)
		}
	}
}

func TestParseConfigMerge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want func(c *config.Config)
	}{
		{"disabling keeps the default command", "[agents.claude]\nenabled = false\n", func(c *config.Config) {
			c.Agents["claude"] = config.AgentConfig{Command: []string{"claude-agent-acp"}, Enabled: false, EnabledSet: true, VerifiedWithin: config.DefaultVerifiedWithin}
		}},
		{"a command keeps the agent enabled", "[agents.codex]\ncommand = [\"/opt/codex-acp\"]\n", func(c *config.Config) {
			c.Agents["codex"] = config.AgentConfig{Command: []string{"/opt/codex-acp"}, Enabled: true, VerifiedWithin: config.DefaultVerifiedWithin}
		}},
		{"an empty core agent table changes nothing", "[agents.hermes]\n", func(*config.Config) {}},
		{"dotted keys", "agents.cursor.enabled = false\nlimits.max_dispatch = 1\n", func(c *config.Config) {
			c.Agents["cursor"] = config.AgentConfig{Command: []string{"agent", "acp"}, Enabled: false, EnabledSet: true, VerifiedWithin: config.DefaultVerifiedWithin}
			c.Limits.MaxDispatch = 1
		}},
		{"inline tables", "limits = {task_timeout = \"5m\"}\nagents = {x = {command = [\"x-acp\"]}}\n", func(c *config.Config) {
			c.Limits.TaskTimeout = 5 * time.Minute
			c.Agents["x"] = config.AgentConfig{Command: []string{"x-acp"}, Enabled: true, VerifiedWithin: config.DefaultVerifiedWithin}
		}},
		{"require_verified keeps the default age", "[agents.claude]\nrequire_verified = true\n", func(c *config.Config) {
			c.Agents["claude"] = config.AgentConfig{Command: []string{"claude-agent-acp"}, Enabled: true, RequireVerified: true,
				VerifiedWithin: config.DefaultVerifiedWithin}
		}},
		{"a custom agent is enabled by default", "[agents.mine]\ncommand = [\"mine\", \"acp\"]\n", func(c *config.Config) {
			c.Agents["mine"] = config.AgentConfig{Command: []string{"mine", "acp"}, Enabled: true, VerifiedWithin: config.DefaultVerifiedWithin}
		}},
		{"a timeout alone configures no adapter", "[authority]\ntimeout = \"1m\"\n", func(c *config.Config) {
			c.Authority.Timeout = time.Minute
		}},
		{"an adapter alone keeps the default timeout", "[authority]\ncommand = [\"auth\"]\n", func(c *config.Config) {
			c.Authority.Command = []string{"auth"}
		}},
		{"one limit keeps the others", "[limits]\nmessage_bytes = 10\n", func(c *config.Config) {
			c.Limits.MessageBytes = 10
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.ParseConfig([]byte(tt.doc), "config.toml")
			if err != nil {
				t.Fatal(err)
			}
			want := config.DefaultConfig()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// badConfigs are malformed documents, each with the key its error must
// name, the line it must give (0: the library knows none, so none is
// given) and further text the message must contain.
var badConfigs = []struct {
	name string
	doc  string
	key  string
	line int
	more string
}{
	// TOML syntax.
	{"unclosed table header", "[limits\nmax_dispatch = 4\n", "", 2, "invalid TOML"}, // the library reports the newline
	{"duplicate key", "[limits]\nmax_dispatch = 3\nmax_dispatch = 4\n", "limits.max_dispatch", 3, "invalid TOML"},
	{"bare string", "[storage]\nsynchronous = FULL\n", "storage.synchronous", 2, "invalid TOML"},
	{"invalid UTF-8", "[limits]\nmax_dispatch = \"\xff\"\n", "", 2, "invalid TOML"},

	// Unknown keys, anywhere.
	{"misspelt limit", "[limits]\nmax_dispatch = 3\nmax_dispatc = 3\n", "limits.max_dispatc", 3, "did you mean max_dispatch?"},
	{"wrong case", "[limits]\nMax_Dispatch = 3\n", "limits.Max_Dispatch", 2, "case-sensitive; did you mean max_dispatch?"},
	{"unknown table", "[limit]\nmax_dispatch = 3\n", "limit", 1, "did you mean limits?"},
	{"unknown top-level key", "\n\nverbose = true\n", "verbose", 3, "unknown key"},
	{"unknown nested table", "[limits.extra]\nx = 1\n", "limits.extra", 1, "unknown key"},
	{"unknown dotted key", "[limits]\nextra.x = 1\n", "limits.extra", 2, "unknown key"},
	{"unknown agent key", "[agents.claude]\nenable = false\n", "agents.claude.enable", 2, "did you mean enabled?"},
	{"unknown authority key", "[authority]\ncomand = [\"a\"]\n", "authority.comand", 2, "did you mean command?"},
	{"unknown storage key", "[storage]\nsync = \"FULL\"\n", "storage.sync", 2, "unknown key"},
	{"misspelt daemon key", "[daemon]\nidle_timout = \"5m\"\n", "daemon.idle_timout", 2, "did you mean idle_timeout?"},
	{"misspelt retention key", "[retention]\nacked_message = \"1h\"\n", "retention.acked_message", 2, "did you mean acked_messages?"},
	{"quota under limits' neighbour", "[storage]\ninbox_messages = 5\n", "storage.inbox_messages", 2, "unknown key"},

	// Tables that are not tables.
	{"limits is a number", "limits = 3\n", "limits", 1, "want a table, got integer 3"},
	{"agents is a number", "agents = 3\n", "agents", 1, "want a table, got integer 3"},
	{"agents is an array", "agents = []\n", "agents", 1, "want a table, got an array"},
	{"agents is an array of tables", "[[agents]]\nname = \"claude\"\n", "agents", 1, "want a table, got an array of tables"},
	{"an agent is a string", "[agents]\nclaude = \"claude-agent-acp\"\n", "agents.claude", 2, "want a table, got string"},
	{"authority is a string", "authority = \"hai\"\n", "authority", 1, "want a table"},

	// Wrong types.
	{"max_dispatch is a word", "[limits]\nmax_dispatch = \"four\"\n", "limits.max_dispatch", 2, `want a positive integer, got string "four"`},
	{"max_dispatch is a float", "[limits]\nmax_dispatch = 4.5\n", "limits.max_dispatch", 2, "got float 4.5"},
	{"max_dispatch is a table", "[limits]\nmax_dispatch = {n = 4}\n", "limits.max_dispatch", 2, "got a table"},
	{"message_bytes is a boolean", "[limits]\nmessage_bytes = true\n", "limits.message_bytes", 2, "got boolean true"},
	{"enabled is a string", "[agents.codex]\nenabled = \"yes\"\n", "agents.codex.enabled", 2, `want true or false, got string "yes"`},
	{"require_verified is a string", "[agents.claude]\nrequire_verified = \"yes\"\n", "agents.claude.require_verified", 2, `want true or false, got string "yes"`},
	{"verified_within is zero", "[agents.claude]\nverified_within = \"0s\"\n", "agents.claude.verified_within", 2, "want a positive duration"},
	{"verified_within is a number", "[agents.claude]\nverified_within = 720\n", "agents.claude.verified_within", 2, "want a duration string"},
	{"timeout is an integer", "[authority]\ntimeout = 5\n", "authority.timeout", 2, "want a duration string"},
	{"authority env is a string", "[authority]\nenv = \"TOKEN\"\n", "authority.env", 2, "want an array of strings"},
	{"authority env has a bad name", "[authority]\nenv = [\"OK\", \"1BAD=x\"]\n", "authority.env", 2, `element 1, "1BAD=x", is not NAME`},
	{"authority env has a number", "[authority]\nenv = [3]\n", "authority.env", 2, "element 0 is integer 3"},
	{"timeout is a datetime", "[limits]\ntask_timeout = 1979-05-27\n", "limits.task_timeout", 2, "got a datetime"},
	{"synchronous is a number", "[storage]\nsynchronous = 2\n", "storage.synchronous", 2, "got integer 2"},
	{"command is a string", "[agents.claude]\ncommand = \"claude-agent-acp --debug\"\n", "agents.claude.command", 2, `such as ["claude-agent-acp", "--debug"]`},
	{"command has a number", "[authority]\ncommand = [\"hai\", 3]\n", "authority.command", 2, "element 1 is integer 3"},
	{"command has a table", "[authority]\ncommand = [\"hai\", {x = 1}]\n", "authority.command", 2, "element 1 is a table"},

	// Bad values.
	{"zero max_dispatch", "[limits]\nmax_dispatch = 0\n", "limits.max_dispatch", 2, "want a positive integer, got 0"},
	{"zero max_dispatch_per_caller", "[limits]\nmax_dispatch_per_caller = 0\n", "limits.max_dispatch_per_caller", 2, "want a positive integer, got 0"},
	{"a share over the default max_dispatch", "[limits]\n\nmax_dispatch_per_caller = 5\n", "limits.max_dispatch_per_caller", 3, "5 is more than limits.max_dispatch (4)"},
	{"a share over max_dispatch set after it", "limits.max_dispatch_per_caller = 3\nlimits.max_dispatch = 2\n", "limits.max_dispatch_per_caller", 1, "3 is more than limits.max_dispatch (2)"},
	{"negative max_dispatch", "[limits]\nmax_dispatch = -1\n", "limits.max_dispatch", 2, "got -1"},
	{"zero max_delegation_depth", "[limits]\nmax_delegation_depth = 0\n", "limits.max_delegation_depth", 2, "want an integer from 1 to 16, got integer 0"},
	{"negative audit retention", "[retention]\naudit = \"-1h\"\n", "retention.audit", 2, "-1h"},
	{"zero inbox_sender_share", "[limits]\ninbox_sender_share = 0\n", "limits.inbox_sender_share", 2, "want a percentage from 1 to 100, got integer 0"},
	{"inbox_sender_share over the whole", "[limits]\ninbox_sender_share = 101\n", "limits.inbox_sender_share", 2, "got integer 101"},
	{"max_delegation_depth over the bound", "[limits]\nmax_delegation_depth = 17\n", "limits.max_delegation_depth", 2, "got integer 17"},
	{"max_delegation_depth is a string", "[limits]\nmax_delegation_depth = \"3\"\n", "limits.max_delegation_depth", 2, `got string "3"`},
	{"zero message_bytes", "[limits]\nmessage_bytes = 0\n", "limits.message_bytes", 2, "positive"},
	{"negative duration", "[limits]\ntask_timeout = \"-5s\"\n", "limits.task_timeout", 2, `want a positive duration, got "-5s"`},
	{"zero duration", "[limits]\nprobe_timeout = \"0s\"\n", "limits.probe_timeout", 2, "positive"},
	{"zero start_timeout", "[limits]\nstart_timeout = \"0s\"\n", "limits.start_timeout", 2, "positive"},
	{"start_timeout is a number", "[limits]\nstart_timeout = 60\n", "limits.start_timeout", 2, "want a duration string"},
	{"zero duration without unit", "[authority]\ntimeout = \"0\"\n", "authority.timeout", 2, "positive"},
	{"duration without unit", "[authority]\ntimeout = \"5\"\n", "authority.timeout", 2, "not a Go duration"},
	{"unparsable duration", "[limits]\nprobe_timeout = \"one minute\"\n", "limits.probe_timeout", 2, `"one minute" is not a Go duration`},
	{"empty duration", "[limits]\ntask_timeout = \"\"\n", "limits.task_timeout", 2, "not a Go duration"},
	{"empty authority command", "[authority]\ncommand = []\n", "authority.command", 2, "the command is empty"},
	{"empty agent command", "[agents.claude]\ncommand = []\n", "agents.claude.command", 2, "the command is empty"},
	{"empty program", "[agents.gemini]\ncommand = [\"\", \"--acp\"]\n", "agents.gemini.command", 2, "program name (element 0) is empty"},
	{"blank program", "[authority]\ncommand = [\"  \"]\n", "authority.command", 2, "is empty"},
	{"padded program", "[authority]\ncommand = [\" hai\"]\n", "authority.command", 2, "leading or trailing spaces"},
	{"shell line as program", "[agents.gemini]\ncommand = [\"gemini --acp\"]\n", "agents.gemini.command", 2, `write ["gemini", "--acp"]`},
	{"NUL in an argument", "[authority]\ncommand = [\"hai\", \"a\\u0000b\"]\n", "authority.command", 2, "element 1 contains a NUL byte"},
	{"lower-case synchronous", "[storage]\nsynchronous = \"full\"\n", "storage.synchronous", 2, `want "FULL" or "NORMAL", got "full"`},
	{"idle_timeout is a number", "[daemon]\nidle_timeout = 0\n", "daemon.idle_timeout", 2, `or "0" for never, got integer 0`},
	{"negative idle_timeout", "[daemon]\nidle_timeout = \"-1m\"\n", "daemon.idle_timeout", 2, `want a duration of 0 or more, got "-1m"`},
	{"idle_timeout without unit", "[daemon]\nidle_timeout = \"10\"\n", "daemon.idle_timeout", 2, "not a Go duration"},
	{"synchronous OFF", "[storage]\nsynchronous = \"OFF\"\n", "storage.synchronous", 2, `got "OFF"`},
	{"daemon path as a string", "[daemon]\npath = \"/usr/bin:/bin\"\n", "daemon.path", 2, `want an array of directories such as ["/usr/bin", "/bin"]`},
	{"relative daemon path", "[daemon]\npath = [\"/usr/bin\", \"bin\"]\n", "daemon.path", 2, `element 1, "bin", is not an absolute directory`},
	{"empty daemon path entry", "[daemon]\npath = [\"\"]\n", "daemon.path", 2, `element 0, "", is not an absolute directory`},
	{"empty daemon path", "[daemon]\npath = []\n", "daemon.path", 2, "the array is empty"},
	{"daemon env names NODE_OPTIONS", "[daemon]\nenv = [\"TZ=UTC\", \"NODE_OPTIONS=--require /x.js\"]\n", "daemon.env", 2, "element 1 names NODE_OPTIONS, a variable that makes programs load code"},
	{"daemon env takes LD_PRELOAD", "[daemon]\nenv = [\"LD_PRELOAD\"]\n", "daemon.env", 2, "names LD_PRELOAD"},
	{"daemon env names PATH", "[daemon]\nenv = [\"PATH=/x\"]\n", "daemon.env", 2, "the daemon's PATH is [daemon] path"},
	{"authority env names BASH_ENV", "[authority]\nenv = [\"BASH_ENV=/x\"]\n", "authority.env", 2, "names BASH_ENV"},
	{"mcp server env names NODE_OPTIONS", "[agents.claude]\nmcp_servers = [{name = \"hai\", command = [\"hai-mcp\"], env = {NODE_OPTIONS = \"--require /x.js\"}}]\n",
		"agents.claude.mcp_servers", 2, "env.NODE_OPTIONS: names NODE_OPTIONS"},
	{"negative inbox_messages", "[limits]\ninbox_messages = -1\n", "limits.inbox_messages", 2, "want an integer of 0 or more, got -1"},
	{"inbox_bytes is a string", "[limits]\ninbox_bytes = \"64MiB\"\n", "limits.inbox_bytes", 2, `want an integer of 0 or more, got string "64MiB"`},
	{"inbox_bytes under message_bytes", "[limits]\nmessage_bytes = 2048\ninbox_bytes = 1024\n", "limits.inbox_bytes", 3, "could never be delivered"},
	{"message_bytes over inbox_bytes", "[limits]\nmessage_bytes = 100000000\n", "limits.message_bytes", 2, "could never be delivered"},
	{"negative min_free_bytes", "[storage]\nmin_free_bytes = -5\n", "storage.min_free_bytes", 2, "got -5"},
	{"min_free_bytes too small", "[storage]\nmin_free_bytes = 1048576\n", "storage.min_free_bytes", 2, "at least 16777216 bytes"},
	{"retention is a number", "[retention]\nacked_messages = 30\n", "retention.acked_messages", 2, `or "0" to keep forever, got integer 30`},
	{"retention in days", "[retention]\nterminal_tasks = \"90d\"\n", "retention.terminal_tasks", 2, `30 days is "720h"`},
	{"negative retention", "[retention]\nterminal_tasks = \"-1h\"\n", "retention.terminal_tasks", 2, `want a duration of 0 or more, got "-1h"`},

	// Agent names.
	{"upper-case agent", "[agents.Claude]\nenabled = false\n", "agents.Claude", 1, "does not match"},
	{"agent with a space", "[agents.\"my agent\"]\ncommand = [\"x\"]\n", `agents."my agent"`, 1, "does not match"},
	{"agent starting with a dash", "[agents.-x]\ncommand = [\"x\"]\n", "agents.-x", 1, "does not match"},
	{"agent name too long", "[agents." + strings.Repeat("a", 65) + "]\ncommand = [\"x\"]\n", "agents.aaaa", 1, "does not match"},
	{"empty agent name", "[agents.\"\"]\ncommand = [\"x\"]\n", `agents.""`, 1, "does not match"},
	{"dotted agent name", "[agents.\"a.b\"]\ncommand = [\"x\"]\n", `agents."a.b"`, 1, "does not match"},
	{"reserved agent", "[agents.relay]\ncommand = [\"relay\"]\n", "agents.relay", 1, "reserved"},
	{"reserved agent, dotted", "agents.relay.enabled = false\n", "agents.relay", 1, "reserved"},

	// Custom agents need a command.
	{"custom agent without command", "[agents.mine]\nenabled = true\n", "agents.mine.command", 1, `custom agent "mine" has no command`},
	{"empty custom agent", "\n[agents.mine]\n", "agents.mine.command", 2, "has no command"},
	{"custom agent, dotted", "\nagents.mine.enabled = true\n", "agents.mine.command", 2, "has no command"},
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range badConfigs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.ParseConfig([]byte(tt.doc), "config.toml")
			if err == nil {
				t.Fatalf("ParseConfig accepted it: %+v", c)
			}
			var e *model.Error
			if !errors.As(err, &e) || e.Code != model.CodeInvalidConfig {
				t.Fatalf("error %#v is not an *model.Error with code invalid_config", err)
			}
			if !reflect.DeepEqual(c, config.Config{}) {
				t.Errorf("a failed parse returned a config: %+v", c)
			}
			prefix := "config.toml: "
			if tt.line > 0 {
				prefix = fmt.Sprintf("config.toml:%d: ", tt.line)
			}
			if !strings.HasPrefix(e.Message, prefix) {
				t.Errorf("message %q does not start with %q", e.Message, prefix)
			}
			if !strings.Contains(e.Message, tt.key) {
				t.Errorf("message %q does not name the key %s", e.Message, tt.key)
			}
			if !strings.Contains(e.Message, tt.more) {
				t.Errorf("message %q does not say %q", e.Message, tt.more)
			}
			if e.Hint == "" {
				t.Errorf("no hint for %q", e.Message)
			}
			t.Logf("%s\n  hint: %s", e.Message, e.Hint)
		})
	}
}

// The first problem in the file is the one reported, every time, although
// the TOML library keeps tables in maps.
func TestParseConfigReportsFirstProblem(t *testing.T) {
	t.Parallel()
	doc := `[limits]
message_bytes = 1
task_timeout = "never"
probe_timeout = "-1s"
max_dispatch = "four"

[agents.a]
enabled = 1
[agents.b]
enabled = 2
`
	for range 50 {
		_, err := config.ParseConfig([]byte(doc), "config.toml")
		if err == nil || !strings.HasPrefix(err.(*model.Error).Message, "config.toml:3: limits.task_timeout: ") {
			t.Fatalf("error = %v, want the task_timeout on line 3", err)
		}
	}
}

func TestParseConfigName(t *testing.T) {
	t.Parallel()
	_, err := config.ParseConfig([]byte("[limits]\nmax_dispatch = 0\n"), "/home/u/.local/state/hai-relay/config.toml")
	if err == nil || !strings.HasPrefix(err.(*model.Error).Message, "/home/u/.local/state/hai-relay/config.toml:2: limits.max_dispatch: ") {
		t.Errorf("error = %v, want it to start with the file name and line", err)
	}
	_, err = config.ParseConfig([]byte("x = 1\n"), "")
	if err == nil || !strings.HasPrefix(err.(*model.Error).Message, "config:1: x: ") {
		t.Errorf("error = %v, want a placeholder file name", err)
	}
}

func TestLoadConfigMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "config.toml"),
		filepath.Join(dir, "no", "such", "dir", "config.toml"),
	} {
		c, err := config.LoadConfig(path)
		if err != nil {
			t.Errorf("LoadConfig(%s) = %v, want the defaults", path, err)
		}
		if !reflect.DeepEqual(c, config.DefaultConfig()) {
			t.Errorf("LoadConfig(%s) = %+v, want the defaults", path, c)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(fullConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := config.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.ParseConfig([]byte(fullConfig), "config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadConfig = %+v, want %+v", got, want)
	}

	if err := os.WriteFile(path, []byte("[limits]\nmax_dispatc = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.LoadConfig(path)
	if model.ErrorCode(err) != model.CodeInvalidConfig || !strings.Contains(err.Error(), path+":2: limits.max_dispatc: unknown key") {
		t.Errorf("LoadConfig(bad file) = %v, want invalid_config naming %s:2 and limits.max_dispatc", err, path)
	}
}

func TestLoadConfigUnreadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notFile := filepath.Join(dir, "config.toml")
	if err := os.Mkdir(notFile, 0o700); err != nil {
		t.Fatal(err)
	}
	fileAsDir := filepath.Join(dir, "file")
	if err := os.WriteFile(fileAsDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{notFile, filepath.Join(fileAsDir, "config.toml"), ""} {
		_, err := config.LoadConfig(path)
		var e *model.Error
		if !errors.As(err, &e) || e.Code != model.CodeInvalidConfig {
			t.Errorf("LoadConfig(%q) = %v, want invalid_config", path, err)
			continue
		}
		if path != "" && !strings.Contains(e.Message, path) {
			t.Errorf("LoadConfig(%q) message %q does not name the file", path, e.Message)
		}
		if e.Hint == "" {
			t.Errorf("LoadConfig(%q) has no hint", path)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key    string
		change func(c *config.Config)
	}{
		{"authority.command", func(c *config.Config) { c.Authority.Command = []string{""} }},
		{"authority.timeout", func(c *config.Config) { c.Authority.Timeout = 0 }},
		{"agents.claude.command", func(c *config.Config) { c.Agents["claude"] = config.AgentConfig{Enabled: true} }},
		{"agents.Bad", func(c *config.Config) { c.Agents["Bad"] = config.AgentConfig{Command: []string{"x"}} }},
		{"agents.relay", func(c *config.Config) { c.Agents["relay"] = config.AgentConfig{Command: []string{"x"}} }},
		{"limits.message_bytes", func(c *config.Config) { c.Limits.MessageBytes = -1 }},
		{"limits.task_timeout", func(c *config.Config) { c.Limits.TaskTimeout = -time.Second }},
		{"limits.probe_timeout", func(c *config.Config) { c.Limits.ProbeTimeout = 0 }},
		{"limits.start_timeout", func(c *config.Config) { c.Limits.StartTimeout = 0 }},
		{"limits.max_dispatch", func(c *config.Config) { c.Limits.MaxDispatch = 0 }},
		{"limits.max_dispatch_per_caller", func(c *config.Config) { c.Limits.MaxDispatchPerCaller = c.Limits.MaxDispatch + 1 }},
		{"limits.max_dispatch_per_caller", func(c *config.Config) { c.Limits.MaxDispatchPerCaller = -1 }},
		{"storage.synchronous", func(c *config.Config) { c.Storage.Synchronous = "" }},
		{"daemon.idle_timeout", func(c *config.Config) { c.Daemon.IdleTimeout = -time.Second }},
		{"daemon.path", func(c *config.Config) { c.Daemon.Path = []string{"relative/bin"} }},
		{"daemon.env", func(c *config.Config) { c.Daemon.Env = []string{"LD_PRELOAD=/x.so"} }},
		{"authority.env", func(c *config.Config) { c.Authority.Env = []string{"NODE_OPTIONS"} }},
		{"limits.inbox_messages", func(c *config.Config) { c.Limits.InboxMessages = -1 }},
		{"limits.inbox_bytes", func(c *config.Config) { c.Limits.InboxBytes = -1 }},
		{"limits.inbox_bytes", func(c *config.Config) { c.Limits.InboxBytes = 10 }},
		{"storage.min_free_bytes", func(c *config.Config) { c.Storage.MinFreeBytes = -1 }},
		{"storage.min_free_bytes", func(c *config.Config) { c.Storage.MinFreeBytes = 1 << 20 }},
		{"retention.acked_messages", func(c *config.Config) { c.Retention.AckedMessages = -time.Second }},
		{"retention.terminal_tasks", func(c *config.Config) { c.Retention.TerminalTasks = -time.Second }},
	}
	for _, tt := range tests {
		c := config.DefaultConfig()
		tt.change(&c)
		err := c.Validate()
		if model.ErrorCode(err) != model.CodeInvalidConfig || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("Validate after breaking %s = %v", tt.key, err)
		}
	}
	if err := (config.Config{}).Validate(); err == nil {
		t.Error("the zero Config validates")
	}
	c := config.DefaultConfig()
	c.Authority.Command = nil
	if err := c.Validate(); err != nil {
		t.Errorf("no authority adapter is valid (tasks are blocked, not the config): %v", err)
	}
}

// FuzzParseConfig checks that any document either parses into a valid
// config holding the core agents, or fails with invalid_config naming the
// file; and never panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(fullConfig))
	for _, tt := range badConfigs {
		f.Add([]byte(tt.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.ParseConfig(data, "f.toml")
		if err != nil {
			var e *model.Error
			if !errors.As(err, &e) || e.Code != model.CodeInvalidConfig || !strings.HasPrefix(e.Message, "f.toml") || e.Hint == "" {
				t.Fatalf("error %#v: want invalid_config naming f.toml, with a hint", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig returned a config that Validate rejects: %v", err)
		}
		for _, name := range model.CoreAgents() {
			if _, ok := c.Agent(name); !ok {
				t.Fatalf("core agent %s lost", name)
			}
		}
	})
}

func ExampleParseConfig() {
	doc := `
[authority]
command = ["hai-authority", "--relay"]

[agents.gemini]
enabled = false

[limits]
max_dispatch = 2
`
	c, err := config.ParseConfig([]byte(doc), "config.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	gemini, _ := c.Agent("gemini")
	fmt.Println("authority:", c.Authority.Command, "timeout", c.Authority.Timeout)
	fmt.Println("gemini:", gemini.Command, "enabled", gemini.Enabled)
	fmt.Println("max_dispatch:", c.Limits.MaxDispatch, "task_timeout:", c.Limits.TaskTimeout)

	_, err = config.ParseConfig([]byte("[limits]\nmax_dispatc = 3\n"), "config.toml")
	e := model.Public(err)
	fmt.Println(e.Code)
	fmt.Println(e.Message)
	fmt.Println(e.Hint)
	// Output:
	// authority: [hai-authority --relay] timeout 5s
	// gemini: [gemini --acp] enabled false
	// max_dispatch: 2 task_timeout: 30m0s
	// invalid_config
	// config.toml:2: limits.max_dispatc: unknown key (did you mean max_dispatch?)
	// remove it or fix its spelling; the keys of [limits] are inbox_bytes, inbox_messages, inbox_sender_share, max_delegation_depth, max_dispatch, max_dispatch_per_caller, message_bytes, probe_timeout, start_timeout, task_timeout
}

func TestParseConfigMCPServers(t *testing.T) {
	t.Parallel()
	c, err := config.ParseConfig([]byte(`[agents.claude]
mcp_servers = [{name = "hai", command = ["hai-mcp", "serve", "--guarded"], env = {HAI_MODE = "guarded"}}, {name = "b_2", command = ["x"]}]
`), "config.toml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Agent("claude")
	want := []config.MCPServer{
		{Name: "hai", Command: []string{"hai-mcp", "serve", "--guarded"}, Env: map[string]string{"HAI_MODE": "guarded"}},
		{Name: "b_2", Command: []string{"x"}},
	}
	if !reflect.DeepEqual(a.MCPServers, want) {
		t.Fatalf("mcp_servers = %+v, want %+v", a.MCPServers, want)
	}
	for _, bad := range []struct{ doc, more string }{
		{`mcp_servers = "hai-mcp"`, "want an array of tables"},
		{`mcp_servers = [{name = "hai"}]`, "name and command are required"},
		{`mcp_servers = [{name = "a b", command = ["x"]}]`, "name must be"},
		{`mcp_servers = [{name = "a", command = ["x"], url = "http://x"}]`, `unknown key "url"`},
		{`mcp_servers = [{name = "a", command = ["x"]}, {name = "a", command = ["y"]}]`, "used twice"},
		{`mcp_servers = [{name = "a", command = ["x"], env = {K = 1}}]`, "env.K must be a string"},
	} {
		_, err := config.ParseConfig([]byte("[agents.claude]\n"+bad.doc+"\n"), "config.toml")
		if err == nil || !strings.Contains(err.Error(), "mcp_servers") || !strings.Contains(err.Error(), bad.more) {
			t.Errorf("%s: error %v, want one naming mcp_servers and saying %q", bad.doc, err, bad.more)
		}
	}
}

// authority.env passes a bare name's value from the daemon's environment
// (when set) and a NAME=value as it is; nothing else.
func TestAuthorityEnviron(t *testing.T) {
	t.Parallel()
	c, err := config.ParseConfig([]byte("[authority]\ncommand = [\"hai\"]\nenv = [\"TOKEN\", \"UNSET\", \"URL=http://x=y\"]\n"), "config.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Authority.Environ(func(k string) string { return map[string]string{"TOKEN": "t0k", "OTHER": "no"}[k] })
	if want := []string{"TOKEN=t0k", "URL=http://x=y"}; !slices.Equal(got, want) {
		t.Fatalf("Environ = %q, want %q", got, want)
	}
}

// TestResolveCommands: a command with a slash that is not absolute is
// joined to the config's directory, a bare name is looked up once (on
// PATH), one not found is kept as written, an absolute one is left alone;
// agents, their MCP servers and the authority adapter alike. The config
// it was called on is not changed.
func TestResolveCommands(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseConfig([]byte(`
[authority]
command = ["./auth/adapter", "--relay"]

[agents.rel]
command = ["./bin/agent", "-x"]
mcp_servers = [{name = "hai", command = ["tools/mcp", "serve"]}, {name = "path", command = ["found-mcp"]}]

[agents.sub]
command = ["tools/adapter"]

[agents.up]
command = ["../shared/agent"]

[agents.abs]
command = ["/opt/agent/bin/acp"]

[agents.bare]
command = ["found-acp", "acp"]

[agents.missing]
command = ["missing-acp"]
`), "config.toml")
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprintf("%+v", cfg)
	var asked []string
	lookPath := func(name string) (string, error) {
		asked = append(asked, name)
		switch name {
		case "found-acp":
			return "/usr/local/bin/found-acp", nil
		case "found-mcp":
			return "/usr/bin/found-mcp", nil
		}
		return "", errors.New("not found")
	}
	dir := "/home/u/.local/state/hai-relay"
	got := cfg.ResolveCommands(dir, lookPath)

	want := map[string][]string{
		"rel":     {dir + "/bin/agent", "-x"},
		"sub":     {dir + "/tools/adapter"},
		"up":      {"/home/u/.local/state/shared/agent"},
		"abs":     {"/opt/agent/bin/acp"},
		"bare":    {"/usr/local/bin/found-acp", "acp"},
		"missing": {"missing-acp"},
	}
	for name, argv := range want {
		if a, _ := got.Agent(name); !slices.Equal(a.Command, argv) {
			t.Errorf("agents.%s command = %q, want %q", name, a.Command, argv)
		}
	}
	if a := got.Authority.Command; !slices.Equal(a, []string{dir + "/auth/adapter", "--relay"}) {
		t.Errorf("authority command = %q", a)
	}
	rel, _ := got.Agent("rel")
	if len(rel.MCPServers) != 2 || !slices.Equal(rel.MCPServers[0].Command, []string{dir + "/tools/mcp", "serve"}) ||
		!slices.Equal(rel.MCPServers[1].Command, []string{"/usr/bin/found-mcp"}) {
		t.Errorf("mcp_servers = %+v", rel.MCPServers)
	}
	for _, name := range asked {
		if strings.Contains(name, "/") {
			t.Errorf("a command with a slash was looked up on PATH: %q", name)
		}
	}
	if after := fmt.Sprintf("%+v", cfg); after != before {
		t.Errorf("ResolveCommands changed the config it was called on:\n%s\n%s", before, after)
	}
}

// idle_timeout takes 0 (never), written "0" or "0s", and any positive
// duration.
func TestParseConfigIdleTimeout(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]time.Duration{
		"":                                  config.DefaultIdleTimeout,
		"[daemon]\n":                        config.DefaultIdleTimeout,
		"[daemon]\nidle_timeout = \"0\"\n":  0,
		"[daemon]\nidle_timeout = \"0s\"\n": 0,
		"[daemon]\nidle_timeout = \"2s\"\n": 2 * time.Second,
		"[daemon]\nidle_timeout = \"1h\"\n": time.Hour,
	} {
		c, err := config.ParseConfig([]byte(doc), "config.toml")
		if err != nil || c.Daemon.IdleTimeout != want {
			t.Errorf("%q: idle timeout %v, %v; want %v", doc, c.Daemon.IdleTimeout, err, want)
		}
	}
}

// One caller's share of the dispatch slots: what the file says, else all
// slots but one (one when there is only one), so that with the defaults
// one caller never holds every slot.
func TestDispatchPerCaller(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc  string
		want int
	}{
		{"", 3},
		{"[limits]\nmax_dispatch = 1\n", 1},
		{"[limits]\nmax_dispatch = 2\n", 1},
		{"[limits]\nmax_dispatch = 10\n", 9},
		{"[limits]\nmax_dispatch = 10\nmax_dispatch_per_caller = 2\n", 2},
		{"[limits]\nmax_dispatch = 3\nmax_dispatch_per_caller = 3\n", 3},
	} {
		c, err := config.ParseConfig([]byte(tc.doc), "config.toml")
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		if got := c.Limits.DispatchPerCaller(); got != tc.want {
			t.Errorf("%q: a caller's share is %d slots, want %d", tc.doc, got, tc.want)
		}
	}
}

// [daemon] path and env: what the file says, in order; Environ splits
// the entries that set a value from the names taken from the starter.
func TestParseConfigDaemonPathAndEnv(t *testing.T) {
	t.Parallel()
	c, err := config.ParseConfig([]byte("[daemon]\npath = [\"/opt/agents/bin\", \"/usr/bin\"]\nenv = [\"ANTHROPIC_API_KEY\", \"TZ=UTC\", \"HTTPS_PROXY=http://p:3128\"]\n"), "config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/agents/bin", "/usr/bin"}; !slices.Equal(c.Daemon.Path, want) {
		t.Errorf("path %q, want %q", c.Daemon.Path, want)
	}
	set, take := c.Daemon.Environ()
	if want := []string{"TZ=UTC", "HTTPS_PROXY=http://p:3128"}; !slices.Equal(set, want) {
		t.Errorf("set %q, want %q", set, want)
	}
	if want := []string{"ANTHROPIC_API_KEY"}; !slices.Equal(take, want) {
		t.Errorf("take %q, want %q", take, want)
	}
	if d := config.DefaultConfig().Daemon; d.Path != nil || d.Env != nil {
		t.Errorf("the default [daemon] has path %q, env %q; want neither (the pinned PATH, nothing added)", d.Path, d.Env)
	}
}
