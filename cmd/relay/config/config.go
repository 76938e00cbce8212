// Package config reads the relay's config.toml: the format, the defaults,
// and the checks that turn a malformed file into one invalid_config error
// naming the file, the line and the key. It lives with the command that
// loads it, so that the TOML library reaches no package of the product
// besides cmd; spec keeps what the relay promises, as data.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/spec"
)

// Config is the relay's configuration: config.toml in the relay home
// (the interface contract (README.md)), merged over DefaultConfig. ParseConfig and LoadConfig only
// return a Config that passes Validate.
type Config struct {
	// Authority is the [authority] table.
	Authority AuthorityConfig
	// Agents are the [agents.NAME] tables, keyed by agent name: the six core
	// agents always, plus any custom agent the file adds.
	Agents map[string]AgentConfig
	// Limits is the [limits] table.
	Limits LimitsConfig
	// Storage is the [storage] table.
	Storage StorageConfig
}

// AuthorityConfig is the [authority] table: the external authority adapter
// (the authority contract (spec/authority.go)).
type AuthorityConfig struct {
	// Command is the adapter's argv, run without a shell (key command). Nil
	// means no adapter is configured, and every task is then blocked with
	// authority_not_configured; there is no default adapter.
	Command []string
	// Timeout is how long one consultation may take (key timeout, default
	// DefaultAuthorityTimeout); then the adapter is killed and the task is
	// blocked with authority_timeout.
	Timeout time.Duration
	// Env is what the adapter's environment holds beyond PATH, HOME, LANG
	// and TZ (key env, an array of strings): "NAME" passes the daemon's
	// own value of NAME, when set; "NAME=value" sets it. Nothing else of
	// the daemon's environment reaches the adapter.
	Env []string
}

// Environ returns the adapter's extra environment entries ("NAME=value")
// for Env, reading the daemon's environment with getenv: a bare name that
// is unset or empty there is left out.
func (a AuthorityConfig) Environ(getenv func(string) string) []string {
	var env []string
	for _, e := range a.Env {
		if strings.Contains(e, "=") {
			env = append(env, e)
		} else if v := getenv(e); v != "" {
			env = append(env, e+"="+v)
		}
	}
	return env
}

// AgentConfig is one [agents.NAME] table.
type AgentConfig struct {
	// Command is the agent's ACP adapter argv, run without a shell (key
	// command). Core agents default to their launch spec (the launch specs (docs/agents.md)); a
	// custom agent must set it.
	Command []string
	// Enabled is the agent's policy signal (key enabled, default true). A
	// task for a disabled agent is blocked with agent_disabled.
	Enabled bool
	// MCPServers are the MCP servers (stdio) the relay passes to the agent
	// in session/new for state_changing tasks, and only for those (key
	// mcp_servers, an array of {name, command, env} tables): HAI-MCP's
	// guarded tools reach a state_changing Claude this way, never through
	// the agent's own settings.
	MCPServers []MCPServer
	// RequireVerified is the agent's hardening policy (key
	// require_verified, default false): when true, a task for the agent is
	// blocked with agent_not_verified unless its last hardening
	// verification (relay agents verify NAME) passed, within
	// VerifiedWithin, on the adapter version installed now.
	RequireVerified bool
	// VerifiedWithin is how old a passed verification may be for
	// RequireVerified (key verified_within, a positive Go duration,
	// default DefaultVerifiedWithin; zero in a Config built in code means
	// the default).
	VerifiedWithin time.Duration
}

// MCPServer is one entry of [agents.NAME] mcp_servers.
type MCPServer struct {
	Name    string
	Command []string
	Env     map[string]string
}

// LimitsConfig is the [limits] table.
type LimitsConfig struct {
	// MessageBytes is the largest message body or task prompt, in bytes
	// (key message_bytes, default DefaultMessageBytes).
	MessageBytes int
	// TaskTimeout bounds one task's run (key task_timeout, default
	// DefaultTaskTimeout); then the task fails with task_timeout.
	TaskTimeout time.Duration
	// ProbeTimeout bounds `relay agents probe` (key probe_timeout, default
	// DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// MaxDispatch is how many tasks may run at once (key max_dispatch,
	// default DefaultMaxDispatch); more wait in submitted.
	MaxDispatch int
}

// StorageConfig is the [storage] table.
type StorageConfig struct {
	// Synchronous is SQLite's synchronous mode for the WAL database (key
	// synchronous): SynchronousFull (the default, DefaultSynchronous) or
	// SynchronousNormal.
	//
	// The risk of NORMAL: a crash of the relay loses nothing, but an OS
	// crash or power loss may roll back the last committed transactions.
	// The database stays consistent and the audit chain still verifies,
	// but the newest rows are gone. Worst case, a task's authorized or
	// working state is lost after its agent was started; recovery then
	// sees the task as submitted and may authorize and dispatch it again,
	// which breaks the at-most-once promise of the lifecycle contract (spec/lifecycle.dot). FULL fsyncs every
	// commit and closes that window, at the cost of slower writes; it is
	// the default for that reason.
	Synchronous string
}

// The SQLite synchronous modes StorageConfig.Synchronous accepts.
const (
	SynchronousFull   = persistence.SyncFull
	SynchronousNormal = persistence.SyncNormal
)

// Defaults for the keys that have one. Each is the default of the package
// that owns the behaviour, so that a part built without a config (a test,
// a zero Options) behaves as a relay with no config.toml.
const (
	DefaultAuthorityTimeout = gates.DefaultAuthorityTimeout
	DefaultMessageBytes     = model.DefaultMessageBytes
	DefaultTaskTimeout      = dispatch.DefaultTaskTimeout
	DefaultProbeTimeout     = dispatch.DefaultProbeTimeout
	DefaultMaxDispatch      = machine.DefaultMaxDispatch
	DefaultVerifiedWithin   = dispatch.DefaultVerifiedWithin
	DefaultSynchronous      = SynchronousFull
)

// defaultCommands are the launch specs of the core agents (the launch specs (docs/agents.md)).
var defaultCommands = map[string][]string{
	"claude":   {"claude-agent-acp"},
	"codex":    {"codex-acp"},
	"gemini":   {"gemini", "--acp"},
	"opencode": {"opencode", "acp"},
	"cursor":   {"agent", "acp"},
	"hermes":   {"hermes", "acp"},
}

// DefaultConfig is the configuration without a config file: the core agents
// (model.CoreAgents) with their default launch specs, all enabled; no
// authority adapter; the default limits and storage mode.
func DefaultConfig() Config {
	agents := make(map[string]AgentConfig, len(model.CoreAgents()))
	for _, name := range model.CoreAgents() {
		agents[name] = AgentConfig{Command: slices.Clone(defaultCommands[name]), Enabled: true, VerifiedWithin: DefaultVerifiedWithin}
	}
	return Config{
		Authority: AuthorityConfig{Timeout: DefaultAuthorityTimeout},
		Agents:    agents,
		Limits: LimitsConfig{
			MessageBytes: DefaultMessageBytes,
			TaskTimeout:  DefaultTaskTimeout,
			ProbeTimeout: DefaultProbeTimeout,
			MaxDispatch:  DefaultMaxDispatch,
		},
		Storage: StorageConfig{Synchronous: DefaultSynchronous},
	}
}

// AgentNames returns the configured agents' names, sorted.
func (c Config) AgentNames() []string {
	return slices.Sorted(maps.Keys(c.Agents))
}

// Agent returns the named agent's configuration; ok is false when no agent
// has that name. The returned Command is a copy.
func (c Config) Agent(name string) (AgentConfig, bool) {
	a, ok := c.Agents[name]
	a.Command = slices.Clone(a.Command)
	return a, ok
}

// ResolveCommands returns c with the program of every command (each
// agent's, each of its MCP servers', the authority adapter's) resolved
// once, as the daemon does when it loads the config, so that nothing
// later resolves it against a task's cwd (a child's relative program is
// looked up in its working directory, which for an agent is the task's):
//
//   - a program with a slash that is not absolute (./bin/agent,
//     tools/adapter) is joined to dir, the directory of config.toml;
//   - a bare name (claude-agent-acp) is looked up with lookPath (the
//     daemon passes exec.LookPath: its own PATH, never the current
//     directory); a name not found is kept as written, so the agent is
//     reported configured-but-not-found as before, and an authority
//     adapter not found still fails to start, closed;
//   - an absolute program is kept.
//
// The arguments are kept as written. c itself is not changed.
func (c Config) ResolveCommands(dir string, lookPath func(string) (string, error)) Config {
	resolve := func(argv []string) []string {
		argv = slices.Clone(argv)
		if len(argv) > 0 && argv[0] != "" {
			argv[0] = ResolveProgram(argv[0], dir, lookPath)
		}
		return argv
	}
	out := c
	out.Authority.Command = resolve(c.Authority.Command)
	out.Agents = make(map[string]AgentConfig, len(c.Agents))
	for name, a := range c.Agents {
		a.Command = resolve(a.Command)
		servers := make([]MCPServer, len(a.MCPServers))
		for i, m := range a.MCPServers {
			m.Command = resolve(m.Command)
			m.Env = maps.Clone(m.Env)
			servers[i] = m
		}
		if a.MCPServers == nil {
			servers = nil
		}
		a.MCPServers = servers
		out.Agents[name] = a
	}
	return out
}

// ResolveProgram resolves one command's program as ResolveCommands does:
// relative with a slash, against dir; a bare name, with lookPath (kept as
// written when not found); absolute, as it is.
func ResolveProgram(program, dir string, lookPath func(string) (string, error)) string {
	switch {
	case filepath.IsAbs(program):
		return program
	case strings.ContainsRune(program, '/'):
		return filepath.Join(dir, program)
	}
	if p, err := lookPath(program); err == nil && filepath.IsAbs(p) {
		return p
	}
	return program
}

// Validate checks a Config built in code by the rules ParseConfig applies
// to a file. The error is an *model.Error with model.CodeInvalidConfig
// naming the offending key.
func (c Config) Validate() error {
	bad := func(key, hint string, err error) error {
		return &model.Error{Code: model.CodeInvalidConfig, Message: key + ": " + err.Error(), Hint: hint}
	}
	if len(c.Authority.Command) > 0 {
		if err := checkArgv(c.Authority.Command); err != nil {
			return bad("authority.command", leafHint("authority.command", ""), err)
		}
	}
	if err := checkPositiveDuration(c.Authority.Timeout); err != nil {
		return bad("authority.timeout", leafHint("authority.timeout", ""), err)
	}
	for _, name := range c.AgentNames() {
		key := toml.Key{"agents", name}
		if err := checkAgentName(name); err != nil {
			return bad(key.String(), agentNameHint, err)
		}
		if err := checkArgv(c.Agents[name].Command); err != nil {
			return bad(append(key, "command").String(), leafHint("agents.*.command", name), err)
		}
	}
	if c.Limits.MessageBytes <= 0 {
		return bad("limits.message_bytes", leafHint("limits.message_bytes", ""), fmt.Errorf("want a positive integer, got %d", c.Limits.MessageBytes))
	}
	if err := checkPositiveDuration(c.Limits.TaskTimeout); err != nil {
		return bad("limits.task_timeout", leafHint("limits.task_timeout", ""), err)
	}
	if err := checkPositiveDuration(c.Limits.ProbeTimeout); err != nil {
		return bad("limits.probe_timeout", leafHint("limits.probe_timeout", ""), err)
	}
	if c.Limits.MaxDispatch <= 0 {
		return bad("limits.max_dispatch", leafHint("limits.max_dispatch", ""), fmt.Errorf("want a positive integer, got %d", c.Limits.MaxDispatch))
	}
	if err := checkSynchronous(c.Storage.Synchronous); err != nil {
		return bad("storage.synchronous", leafHint("storage.synchronous", ""), err)
	}
	return nil
}

// LoadConfig reads the config file at path and merges it over
// DefaultConfig, as ParseConfig does. A missing file is not an error: it
// yields DefaultConfig. Any other read error, and any malformed content, is
// an *model.Error with model.CodeInvalidConfig.
func LoadConfig(path string) (Config, error) {
	if path == "" {
		return Config{}, &model.Error{Code: model.CodeInvalidConfig,
			Message: "no config file path given", Hint: "pass the path of config.toml in the relay home"}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultConfig(), nil
	}
	if err != nil {
		reason := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err.Error()
		}
		return Config{}, &model.Error{Code: model.CodeInvalidConfig,
			Message: fmt.Sprintf("%s: cannot read the config file: %s", path, reason),
			Hint:    "make it a readable file, or remove it to run with the defaults",
			Err:     err}
	}
	return ParseConfig(data, path)
}

// ParseConfig parses the TOML document data, the content of the config file
// called name (used in error messages), and merges it over DefaultConfig.
//
// The format (the interface contract (README.md)), every table and key optional:
//
//	[authority]
//	command = ["hai-authority", "--relay"]  # argv, no shell; absent: no adapter
//	timeout = "5s"                          # Go duration, > 0
//
//	[agents.gemini]                         # a core agent: keys override the defaults
//	enabled = false
//
//	[agents.claude]
//	require_verified = true                 # default false: see docs/agents.md
//	verified_within = "720h"                # default 720h
//
//	[agents.my-agent]                       # a custom agent: command is required
//	command = ["my-agent-acp"]
//	enabled = true                          # default true
//
//	[limits]
//	message_bytes = 262144                  # integer > 0
//	task_timeout = "30m"
//	probe_timeout = "60s"
//	max_dispatch = 4                        # integer > 0
//
//	[storage]
//	synchronous = "NORMAL"                  # or "FULL"; see StorageConfig
//
// Agent names match [a-z0-9][a-z0-9_-]{0,63}; "relay" is reserved. Keys are
// case-sensitive. Nothing malformed is ignored or replaced by a default: a
// syntax error, an unknown key, a value of the wrong type or out of range,
// an empty command or a bad agent name is an *model.Error with
// model.CodeInvalidConfig whose message names the file, the line where the
// TOML library knows it, and the key, and whose hint says what to write.
// One problem is reported: the first in document order, or else the first
// custom agent without a command. The same input always gives the same
// error.
func ParseConfig(data []byte, name string) (Config, error) {
	if name == "" {
		name = "config"
	}
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return Config{}, syntaxError(name, err)
	}
	p := &parser{name: name, md: &md, top: top, tables: map[string]map[string]toml.Primitive{}}
	cfg := DefaultConfig()
	// MetaData.Keys lists every key in document order, parents before
	// children, so the first problem reported is the first in the file.
	// Unknown keys are found here against the exact schema rather than
	// with MetaData.Undecoded after a struct decode: the library matches
	// struct fields case-insensitively (Max_Dispatch would be taken as
	// max_dispatch) and silently drops a non-table value for a map
	// (agents = 3), and neither should pass.
	for _, k := range md.Keys() {
		if err := p.visit(&cfg, k); err != nil {
			return Config{}, err
		}
	}
	for _, a := range p.agents {
		if _, core := defaultCommands[a.name]; core || a.command {
			continue
		}
		key := toml.Key{"agents", a.name}
		return Config{}, p.fail(a.at, append(key, "command"), leafHint("agents.*.command", a.name),
			"custom agent %q has no command; only the core agents have a default", a.name)
	}
	if err := cfg.Validate(); err != nil {
		// Unreachable when the rules above and Validate agree; kept so that
		// ParseConfig never returns a Config that Validate rejects.
		var e *model.Error
		if errors.As(err, &e) {
			e.Message = name + ": " + e.Message
		}
		return Config{}, err
	}
	return cfg, nil
}

const agentNameHint = "agent names are 1–64 characters of [a-z0-9_-] starting with a letter or digit, and \"relay\" is reserved"

func checkAgentName(name string) error {
	if name == model.RelayAgent {
		return fmt.Errorf("%q is reserved for the relay's own messages", name)
	}
	if !spec.ValidAgentName(name) {
		return fmt.Errorf("agent name %s does not match [a-z0-9][a-z0-9_-]{0,63}", quote(name))
	}
	return nil
}

// tableKeys are the schema's tables; "agents.*" is any agent.
var tableKeys = map[string]bool{
	"authority": true,
	"agents":    true,
	"agents.*":  true,
	"limits":    true,
	"storage":   true,
}

// leaf is one value key of the schema.
type leaf struct {
	// want says what the key takes, for hints.
	want string
	// example is a valid line for the key, for hints.
	example string
	// set validates v, the decoded TOML value, and stores it in c; agent is
	// the agent's name for agents.* keys.
	set func(c *Config, agent string, v any) error
}

// leafKeys are the schema's value keys.
var leafKeys = map[string]leaf{
	"authority.command": {
		want:    "the authority adapter's argv, run without a shell",
		example: `command = ["hai-authority", "--relay"]`,
		set: func(c *Config, _ string, v any) error {
			argv, err := parseArgv(v)
			c.Authority.Command = argv
			return err
		},
	},
	"authority.env": {
		want:    `an array of "NAME" (passed from the daemon's environment) or "NAME=value" entries`,
		example: `env = ["HAI_AUTHORITY_TOKEN", "HAI_AUTHORITY_URL=http://127.0.0.1:8700"]`,
		set: func(c *Config, _ string, v any) (err error) {
			c.Authority.Env, err = parseEnvList(v)
			return err
		},
	},
	"authority.timeout": {
		want:    "a positive Go duration (default " + shortDuration(DefaultAuthorityTimeout) + ")",
		example: `timeout = "5s"`,
		set: func(c *Config, _ string, v any) (err error) {
			c.Authority.Timeout, err = parseDuration(v)
			return err
		},
	},
	"agents.*.command": {
		want:    "the agent's ACP adapter argv, run without a shell",
		example: "", // built by leafHint from the agent's name
		set: func(c *Config, agent string, v any) error {
			argv, err := parseArgv(v)
			a := c.Agents[agent]
			a.Command = argv
			c.Agents[agent] = a
			return err
		},
	},
	"agents.*.enabled": {
		want:    "true or false (default true)",
		example: `enabled = true`,
		set: func(c *Config, agent string, v any) error {
			b, ok := v.(bool)
			if !ok {
				return fmt.Errorf("want true or false, got %s", describe(v))
			}
			a := c.Agents[agent]
			a.Enabled = b
			c.Agents[agent] = a
			return nil
		},
	},
	"agents.*.require_verified": {
		want:    "true or false (default false): block tasks unless the agent's last `relay agents verify` passed, recently, on the installed adapter",
		example: `require_verified = true`,
		set: func(c *Config, agent string, v any) error {
			b, ok := v.(bool)
			if !ok {
				return fmt.Errorf("want true or false, got %s", describe(v))
			}
			a := c.Agents[agent]
			a.RequireVerified = b
			c.Agents[agent] = a
			return nil
		},
	},
	"agents.*.verified_within": {
		want:    "a positive Go duration (default " + shortDuration(DefaultVerifiedWithin) + "): how old a passed verification may be for require_verified",
		example: `verified_within = "720h"`,
		set: func(c *Config, agent string, v any) error {
			d, err := parseDuration(v)
			a := c.Agents[agent]
			a.VerifiedWithin = d
			c.Agents[agent] = a
			return err
		},
	},
	"agents.*.mcp_servers": {
		want:    "an array of {name, command, env} tables: stdio MCP servers passed to state_changing tasks",
		example: `mcp_servers = [{name = "hai", command = ["hai-mcp", "serve"], env = {HAI_LEASE_MODE = "guarded"}}]`,
		set: func(c *Config, agent string, v any) error {
			servers, err := parseMCPServers(v)
			a := c.Agents[agent]
			a.MCPServers = servers
			c.Agents[agent] = a
			return err
		},
	},
	"limits.message_bytes": {
		want:    fmt.Sprintf("a positive number of bytes (default %d)", DefaultMessageBytes),
		example: fmt.Sprintf("message_bytes = %d", DefaultMessageBytes),
		set: func(c *Config, _ string, v any) (err error) {
			c.Limits.MessageBytes, err = parsePositiveInt(v)
			return err
		},
	},
	"limits.task_timeout": {
		want:    "a positive Go duration (default " + shortDuration(DefaultTaskTimeout) + ")",
		example: `task_timeout = "30m"`,
		set: func(c *Config, _ string, v any) (err error) {
			c.Limits.TaskTimeout, err = parseDuration(v)
			return err
		},
	},
	"limits.probe_timeout": {
		want:    "a positive Go duration (default " + shortDuration(DefaultProbeTimeout) + ")",
		example: `probe_timeout = "60s"`,
		set: func(c *Config, _ string, v any) (err error) {
			c.Limits.ProbeTimeout, err = parseDuration(v)
			return err
		},
	},
	"limits.max_dispatch": {
		want:    fmt.Sprintf("a positive number of tasks run at once (default %d)", DefaultMaxDispatch),
		example: fmt.Sprintf("max_dispatch = %d", DefaultMaxDispatch),
		set: func(c *Config, _ string, v any) (err error) {
			c.Limits.MaxDispatch, err = parsePositiveInt(v)
			return err
		},
	},
	"storage.synchronous": {
		want:    fmt.Sprintf("%q or %q (default %q)", SynchronousFull, SynchronousNormal, DefaultSynchronous),
		example: `synchronous = "FULL"`,
		set: func(c *Config, _ string, v any) error {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("want %q or %q, got %s", SynchronousFull, SynchronousNormal, describe(v))
			}
			c.Storage.Synchronous = s
			return checkSynchronous(s)
		},
	},
}

// leafHint is the hint shown with a bad value of the schema key pattern.
func leafHint(pattern, agent string) string {
	l, ok := leafKeys[pattern]
	if !ok {
		return ""
	}
	table, key, _ := strings.Cut(pattern, ".")
	if table == "agents" {
		if agent == "" {
			agent = "NAME"
		}
		table = toml.Key{"agents", agent}.String()
		key = strings.TrimPrefix(key, "*.")
	}
	example := l.example
	if pattern == "agents.*.command" {
		if argv, core := defaultCommands[agent]; core {
			example = "command = " + tomlArray(argv)
		} else {
			example = "command = " + tomlArray([]string{"/path/to/" + agent + "-acp"})
		}
	}
	return fmt.Sprintf("under [%s], %s is %s, for example: %s", table, key, l.want, example)
}

// pattern maps a key to its schema pattern: an agent's name becomes "*".
func pattern(k toml.Key) string {
	if len(k) >= 2 && k[0] == "agents" {
		return strings.Join(append([]string{"agents", "*"}, k[2:]...), ".")
	}
	return strings.Join(k, ".")
}

// agentSeen records an agent table of the file, in document order.
type agentSeen struct {
	name    string
	at      toml.Key // the first key that mentioned it
	command bool     // whether it sets command
}

// parser walks one decoded document.
type parser struct {
	name   string
	md     *toml.MetaData
	top    map[string]toml.Primitive
	tables map[string]map[string]toml.Primitive // decoded tables by key
	agents []agentSeen
}

// visit checks one key of the document and applies its value to cfg.
func (p *parser) visit(cfg *Config, k toml.Key) error {
	if len(k) >= 2 && k[0] == "agents" {
		name := k[1]
		if err := checkAgentName(name); err != nil {
			hint := agentNameHint
			if name == model.RelayAgent {
				hint = "choose another name: \"relay\" is the sender of the relay's own task notifications"
			}
			return p.fail(k, k[:2], hint, "%v", err)
		}
		p.noteAgent(name, k)
		if _, ok := cfg.Agents[name]; !ok {
			// A custom agent is enabled unless the file says otherwise,
			// like the core ones; it still needs a command (checked once
			// the whole file is read).
			cfg.Agents[name] = AgentConfig{Enabled: true, VerifiedWithin: DefaultVerifiedWithin}
		}
	}
	// Walk down k: every prefix must be a schema table until a value key is
	// reached. Keys below a value key (inside an inline table or an array
	// given as the value) are reported as that value's problem.
	for i := 1; i <= len(k); i++ {
		sub := k[:i]
		pat := pattern(sub)
		if l, ok := leafKeys[pat]; ok {
			agent := ""
			if sub[0] == "agents" {
				agent = sub[1]
			}
			v, _ := p.value(sub)
			if err := l.set(cfg, agent, v); err != nil {
				return p.fail(sub, sub, leafHint(pat, agent), "%v", err)
			}
			return nil
		}
		if !tableKeys[pat] {
			return p.unknown(k, sub)
		}
		if i == len(k) {
			v, _ := p.value(sub)
			if _, ok := v.(map[string]any); !ok {
				return p.fail(sub, sub, tableHint(sub), "want a table, got %s", describe(v))
			}
		}
	}
	return nil
}

// noteAgent records that the file configures the agent name.
func (p *parser) noteAgent(name string, k toml.Key) {
	i := slices.IndexFunc(p.agents, func(a agentSeen) bool { return a.name == name })
	if i < 0 {
		p.agents = append(p.agents, agentSeen{name: name, at: slices.Clone(k)})
		i = len(p.agents) - 1
	}
	if len(k) >= 3 && k[2] == "command" {
		p.agents[i].command = true
	}
}

// tableHint is the hint for a table key whose value is not a table.
func tableHint(k toml.Key) string {
	if k[0] == "agents" && len(k) == 1 {
		return "agents are configured one table each: [agents.NAME]"
	}
	return fmt.Sprintf("write [%s] as a table header followed by its keys", k)
}

// unknown reports k, a key that the schema does not have, found at the
// document's key at (k or a key below it).
func (p *parser) unknown(at, k toml.Key) error {
	parent := pattern(k[:len(k)-1])
	var siblings []string
	for key := range tableKeys {
		if before, after, ok := cutLast(key); ok && before == parent {
			siblings = append(siblings, after)
		} else if !ok && parent == "" {
			siblings = append(siblings, key)
		}
	}
	for key := range leafKeys {
		if before, after, ok := cutLast(key); ok && before == parent {
			siblings = append(siblings, after)
		}
	}
	siblings = slices.DeleteFunc(siblings, func(s string) bool { return s == "*" })
	slices.Sort(siblings)
	msg := "unknown key"
	if s := suggest(k[len(k)-1], siblings); s != "" {
		if strings.EqualFold(s, k[len(k)-1]) {
			msg += " (keys are case-sensitive; "
		} else {
			msg += " ("
		}
		msg += fmt.Sprintf("did you mean %s?)", s)
	}
	var hint string
	switch {
	case len(k) == 1:
		hint = "the tables are [authority], [agents.NAME], [limits] and [storage]"
	default:
		hint = fmt.Sprintf("remove it or fix its spelling; the keys of [%s] are %s",
			k[:len(k)-1], strings.Join(siblings, ", "))
	}
	return p.fail(at, k, hint, "%s", msg)
}

// cutLast splits a dotted schema key at its last dot.
func cutLast(key string) (before, after string, ok bool) {
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		return "", key, false
	}
	return key[:i], key[i+1:], true
}

// suggest returns the candidate closest to s (equal but for case, or within
// two edits), or "".
func suggest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if strings.EqualFold(c, s) {
			return c
		}
		if d := editDistance(strings.ToLower(s), c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// prim returns the undecoded value of key k.
func (p *parser) prim(k toml.Key) (toml.Primitive, bool) {
	m := p.top
	for i, s := range k {
		v, ok := m[s]
		if !ok {
			return toml.Primitive{}, false
		}
		if i == len(k)-1 {
			return v, true
		}
		id := k[:i+1].String()
		next, ok := p.tables[id]
		if !ok {
			// Decoding a non-table into a map leaves it empty, and the
			// lookup below then fails, as it should.
			next = map[string]toml.Primitive{}
			if err := p.md.PrimitiveDecode(v, &next); err != nil {
				return toml.Primitive{}, false
			}
			p.tables[id] = next
		}
		m = next
	}
	return toml.Primitive{}, false
}

// value returns the decoded value of key k: a string, int64, float64, bool,
// a TOML datetime, []any, map[string]any or []map[string]any.
func (p *parser) value(k toml.Key) (any, bool) {
	pr, ok := p.prim(k)
	if !ok {
		return nil, false
	}
	var v any
	if err := p.md.PrimitiveDecode(pr, &v); err != nil {
		return nil, false
	}
	return v, true
}

// lineProbe fails to decode, so that the TOML library reports the position
// of the key it was asked to decode.
type lineProbe struct{}

var errLineProbe = errors.New("line probe")

func (*lineProbe) UnmarshalTOML(any) error { return errLineProbe }

// line returns the line of key k in the file, or 0 when the library does
// not know it (an implicit table, such as agents in [agents.claude]).
func (p *parser) line(k toml.Key) int {
	pr, ok := p.prim(k)
	if !ok {
		return 0
	}
	var pe toml.ParseError
	if errors.As(p.md.PrimitiveDecode(pr, &lineProbe{}), &pe) {
		return pe.Position.Line
	}
	return 0
}

// fail builds the error for a problem with key, located at the line of at.
func (p *parser) fail(at, key toml.Key, hint, format string, args ...any) error {
	loc := p.name
	if line := p.line(at); line > 0 {
		loc = fmt.Sprintf("%s:%d", p.name, line)
	}
	return &model.Error{
		Code:    model.CodeInvalidConfig,
		Message: fmt.Sprintf("%s: %s: %s", loc, key, fmt.Sprintf(format, args...)),
		Hint:    hint,
	}
}

// syntaxError converts the TOML library's error for a document that does
// not parse.
func syntaxError(name string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return &model.Error{Code: model.CodeInvalidConfig,
			Message: fmt.Sprintf("%s: invalid TOML", name),
			Hint:    "check the file against https://toml.io/en/v1.0.0", Err: err}
	}
	msg := fmt.Sprintf("%s:%d: invalid TOML", name, pe.Position.Line)
	if pe.LastKey != "" {
		msg += fmt.Sprintf(" (last key read: %s)", pe.LastKey)
	}
	return &model.Error{Code: model.CodeInvalidConfig,
		Message: msg + ": " + pe.Message,
		Hint:    fmt.Sprintf("fix the TOML syntax on line %d; the format is https://toml.io/en/v1.0.0", pe.Position.Line)}
}

// parseArgv takes a TOML array of strings and checks it with checkArgv.
func parseArgv(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		if s, isString := v.(string); isString && s != "" {
			return nil, fmt.Errorf("want an array of strings such as %s, got %s",
				tomlArray(strings.Fields(s)), describe(v))
		}
		return nil, fmt.Errorf("want an array of strings, got %s", describe(v))
	}
	argv := make([]string, len(arr))
	for i, el := range arr {
		s, ok := el.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %s, want a string", i, describe(el))
		}
		argv[i] = s
	}
	return argv, checkArgv(argv)
}

// parseEnvList reads an array of "NAME" or "NAME=value" strings, NAME being
// [A-Za-z_][A-Za-z0-9_]*.
func parseEnvList(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of strings, got %s", describe(v))
	}
	env := make([]string, len(arr))
	for i, el := range arr {
		s, ok := el.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %s, want a string", i, describe(el))
		}
		name, value, _ := strings.Cut(s, "=")
		if !envNameShape(name) || strings.IndexByte(value, 0) >= 0 {
			return nil, fmt.Errorf("element %d, %s, is not NAME or NAME=value with NAME of [A-Za-z_][A-Za-z0-9_]*", i, quote(s))
		}
		env[i] = s
	}
	return env, nil
}

func envNameShape(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// parseMCPServers reads an mcp_servers array: each entry a table with a
// name ([A-Za-z0-9_-], unique), a command (an argv) and an optional env
// table of strings; nothing else.
func parseMCPServers(v any) ([]MCPServer, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of tables, got %s", describe(v))
	}
	out := make([]MCPServer, 0, len(arr))
	seen := map[string]bool{}
	for i, el := range arr {
		m, ok := el.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("entry %d is %s, want a table {name, command, env}", i, describe(el))
		}
		var srv MCPServer
		for k, val := range m {
			switch k {
			case "name":
				name, ok := val.(string)
				if !ok || !mcpNameShape(name) {
					return nil, fmt.Errorf("entry %d: name must be 1-64 characters of [A-Za-z0-9_-], got %s", i, describe(val))
				}
				srv.Name = name
			case "command":
				argv, err := parseArgv(val)
				if err != nil {
					return nil, fmt.Errorf("entry %d: command: %w", i, err)
				}
				srv.Command = argv
			case "env":
				tbl, ok := val.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("entry %d: env must be a table of strings, got %s", i, describe(val))
				}
				srv.Env = map[string]string{}
				for ek, ev := range tbl {
					es, ok := ev.(string)
					if !ok || ek == "" || strings.ContainsAny(ek, "=\x00") {
						return nil, fmt.Errorf("entry %d: env.%s must be a string under a variable name", i, ek)
					}
					srv.Env[ek] = es
				}
			default:
				return nil, fmt.Errorf("entry %d: unknown key %s (want name, command, env)", i, quote(k))
			}
		}
		if srv.Name == "" || len(srv.Command) == 0 {
			return nil, fmt.Errorf("entry %d: name and command are required", i)
		}
		if seen[srv.Name] {
			return nil, fmt.Errorf("entry %d: name %s is used twice", i, quote(srv.Name))
		}
		seen[srv.Name] = true
		out = append(out, srv)
	}
	return out, nil
}

func mcpNameShape(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// checkArgv checks a command: a program and its arguments, run without a
// shell.
func checkArgv(argv []string) error {
	if len(argv) == 0 {
		return errors.New("the command is empty; want the program and its arguments")
	}
	prog := argv[0]
	switch {
	case strings.TrimSpace(prog) == "":
		return errors.New("the program name (element 0) is empty")
	case strings.TrimSpace(prog) != prog:
		return fmt.Errorf("the program name %s has leading or trailing spaces", quote(prog))
	case strings.IndexFunc(prog, unicode.IsSpace) >= 0 && !strings.ContainsRune(prog, '/'):
		// A bare name with a space is almost surely a shell command line
		// written as one string; a path with a space is left alone.
		return fmt.Errorf("the program name %s contains a space; the command is an argv list run without a shell, so write %s",
			quote(prog), tomlArray(append(strings.Fields(prog), argv[1:]...)))
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("element %d contains a NUL byte", i)
		}
	}
	return nil
}

// shortDuration formats d without trailing zero units: 30m, not 30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// tomlArray writes argv as a TOML array of strings, for messages.
func tomlArray(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// parseDuration takes a TOML string holding a positive Go duration.
func parseDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration string such as \"5s\", got %s", describe(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s is not a Go duration such as \"5s\", \"1m30s\" or \"2h\"", quote(s))
	}
	if err := checkPositiveDuration(d); err != nil {
		return 0, fmt.Errorf("want a positive duration, got %s", quote(s))
	}
	return d, nil
}

func checkPositiveDuration(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("want a positive duration, got %s", d)
	}
	return nil
}

// parsePositiveInt takes a TOML integer greater than zero.
func parsePositiveInt(v any) (int, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("want a positive integer, got %s", describe(v))
	}
	if n <= 0 {
		return 0, fmt.Errorf("want a positive integer, got %d", n)
	}
	if int64(int(n)) != n {
		return 0, fmt.Errorf("%d is too large", n)
	}
	return int(n), nil
}

func checkSynchronous(s string) error {
	if s != SynchronousFull && s != SynchronousNormal {
		return fmt.Errorf("want %q or %q, got %s", SynchronousFull, SynchronousNormal, quote(s))
	}
	return nil
}

// describe names a decoded TOML value's type, with the value when short.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		return "string " + quote(v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case time.Time:
		return "a datetime"
	}
	return fmt.Sprintf("a %T", v)
}

// quote quotes s for a message, shortened to 40 runes.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40]) + "…"
	}
	return fmt.Sprintf("%q", s)
}
