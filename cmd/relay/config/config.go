// Package config reads the relay's config.toml: the format, the defaults,
// and the checks that turn a malformed file into one invalid_config error
// naming the file, the line and the key. It lives with the command that
// loads it, so that the TOML library reaches no package of the product
// besides cmd; spec keeps what the relay promises, as data.
package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/spec"
)

// Config is the relay's configuration: config.toml in the relay home (its
// keys: docs/config.md), merged over DefaultConfig. ParseConfig only
// returns a Config that passes Validate.
type Config struct {
	// Authority is the [authority] table.
	Authority AuthorityConfig `toml:"authority"`
	// Agents are the [agents.NAME] tables, keyed by agent name: the six core
	// agents always, plus any custom agent the file adds.
	Agents map[string]AgentConfig `toml:"agents"`
	// Limits is the [limits] table.
	Limits LimitsConfig `toml:"limits"`
	// Storage is the [storage] table.
	Storage StorageConfig `toml:"storage"`
	// Retention is the [retention] table.
	Retention RetentionConfig `toml:"retention"`
	// Daemon is the [daemon] table.
	Daemon DaemonConfig `toml:"daemon"`
}

// RetentionConfig is the [retention] table: how long the daemon keeps
// what is done with before it prunes it (at start and every hour, and on
// `relay prune`). Zero keeps it forever. A message that is not
// acknowledged and a task that has not ended are never pruned.
type RetentionConfig struct {
	// AckedMessages is how long an acknowledged message is kept after its
	// acknowledgement (key acked_messages, a Go duration, default
	// DefaultAckedMessagesRetention).
	AckedMessages time.Duration `toml:"acked_messages"`
	// TerminalTasks is how long a task is kept after it ended (completed,
	// failed, canceled, rejected or blocked), with its events, verdicts
	// and agent log (key terminal_tasks, default
	// DefaultTerminalTasksRetention).
	TerminalTasks time.Duration `toml:"terminal_tasks"`
	// Audit is how long an audit row is kept (key audit, default
	// DefaultAuditRetention): older rows are cut from the start of the
	// chain behind a checkpoint that keeps their digest, and `relay audit
	// verify` verifies the rest from it.
	Audit time.Duration `toml:"audit"`
}

// Policy is the retention policy the table sets.
func (r RetentionConfig) Policy() model.RetentionPolicy {
	return model.RetentionPolicy{AckedMessages: r.AckedMessages, TerminalTasks: r.TerminalTasks, Audit: r.Audit}
}

// DaemonConfig is the [daemon] table.
type DaemonConfig struct {
	// IdleTimeout is how long a daemon started on demand (by a facade's
	// autostart) stays up with nothing to do: no facade connected, no
	// request being served, no task running or queued (key idle_timeout,
	// a Go duration, default DefaultIdleTimeout). Zero means never. A
	// daemon started by hand never exits on its own.
	IdleTimeout time.Duration `toml:"idle_timeout"`
	// Path is the PATH agent commands (and the authority adapter's) are
	// resolved through, and the PATH every child of the daemon gets (key
	// path, an array of absolute directories). Nil means the PATH pinned
	// in the home by the first start by hand (docs/reliability.md); an
	// entry that is not safe (not owned by the user or root, or group- or
	// other-writable, or below such a directory) is skipped and logged
	// either way.
	Path []string `toml:"path"`
	// Env is what the daemon's environment holds beyond what it takes by
	// itself (key env, an array of strings): "NAME" takes NAME's value
	// from the environment of whoever starts the daemon — for a daemon a
	// facade started, the facade's, which its MCP client's config sets;
	// "NAME=value" sets it. A code-loading variable or PATH is refused
	// (PATH is Path's).
	Env []string `toml:"env"`
}

// Environ returns the "NAME=value" entries of Env, and the names Env
// takes from the starting environment (its bare names), in order.
func (d DaemonConfig) Environ() (set []string, take []string) {
	for _, e := range d.Env {
		if strings.Contains(e, "=") {
			set = append(set, e)
		} else {
			take = append(take, e)
		}
	}
	return set, take
}

// AuthorityConfig is the [authority] table: the external authority adapter
// (its wire types are in spec/authority.go).
type AuthorityConfig struct {
	// Command is the adapter's argv, run without a shell (key command). Nil
	// means no adapter is configured, and every task is then blocked with
	// authority_not_configured; there is no default adapter.
	Command []string `toml:"command"`
	// Timeout is how long one consultation may take (key timeout, default
	// DefaultAuthorityTimeout); then the adapter is killed and the task is
	// blocked with authority_timeout.
	Timeout time.Duration `toml:"timeout"`
	// Env is what the adapter's environment holds beyond PATH, HOME, LANG
	// and TZ (key env, an array of strings): "NAME" passes the daemon's
	// own value of NAME, when set; "NAME=value" sets it. Nothing else of
	// the daemon's environment reaches the adapter.
	Env []string `toml:"env"`
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
	Command []string `toml:"command"`
	// Enabled is the agent's policy signal (key enabled, default true). A
	// task for a disabled agent is blocked with agent_disabled.
	Enabled bool `toml:"enabled"`
	// EnabledSet says that config.toml set enabled (false: the default).
	EnabledSet bool `toml:"-"`
	// MCPServers are the MCP servers (stdio) the relay passes to the agent
	// in session/new for state_changing tasks, and only for those (key
	// mcp_servers, an array of {name, command, env} tables): HAI-MCP's
	// guarded tools reach a state_changing Claude this way, never through
	// the agent's own settings.
	MCPServers []MCPServer `toml:"mcp_servers"`
	// RequireVerified is the agent's hardening policy (key
	// require_verified, default false): when true, a task for the agent is
	// blocked with agent_not_verified unless its last hardening
	// verification (relay agents verify NAME) passed, within
	// VerifiedWithin, on the adapter version installed now.
	RequireVerified bool `toml:"require_verified"`
	// VerifiedWithin is how old a passed verification may be for
	// RequireVerified (key verified_within, a positive Go duration,
	// default DefaultVerifiedWithin; zero in a Config built in code means
	// the default).
	VerifiedWithin time.Duration `toml:"verified_within"`
}

// MCPServer is one entry of [agents.NAME] mcp_servers.
type MCPServer struct {
	Name    string            `toml:"name"`
	Command []string          `toml:"command"`
	Env     map[string]string `toml:"env"`
}

// LimitsConfig is the [limits] table.
type LimitsConfig struct {
	// MessageBytes is the largest message body or task prompt, in bytes
	// (key message_bytes, default DefaultMessageBytes).
	MessageBytes int `toml:"message_bytes"`
	// TaskTimeout bounds one task's run (key task_timeout, default
	// DefaultTaskTimeout); then the task fails with task_timeout.
	TaskTimeout time.Duration `toml:"task_timeout"`
	// StartTimeout bounds one task's start-up: from the agent's spawn
	// until its ACP session is set up (initialize, session/new, the
	// hardening's mode), key start_timeout, default DefaultStartTimeout;
	// then the agent is killed and the task fails agent_start_timeout.
	StartTimeout time.Duration `toml:"start_timeout"`
	// ProbeTimeout bounds `relay agents probe` (key probe_timeout, default
	// DefaultProbeTimeout).
	ProbeTimeout time.Duration `toml:"probe_timeout"`
	// MaxDispatch is how many tasks may run at once (key max_dispatch,
	// default DefaultMaxDispatch); more wait in submitted.
	MaxDispatch int `toml:"max_dispatch"`
	// MaxDispatchPerCaller is how many of those one caller's tasks may
	// hold at once (key max_dispatch_per_caller, at most MaxDispatch);
	// zero means the default, DefaultMaxDispatchPerCaller(MaxDispatch):
	// all slots but one, so that one caller never holds every slot. A
	// caller's further tasks wait in submitted while other callers' tasks
	// are served.
	MaxDispatchPerCaller int `toml:"max_dispatch_per_caller"`
	// InboxMessages is how many unacknowledged messages one recipient may
	// hold (key inbox_messages, default DefaultInboxMessages); a message
	// past it is refused with recipient_inbox_full. Zero means no limit.
	InboxMessages int `toml:"inbox_messages"`
	// InboxBytes is how many bytes of bodies one recipient's
	// unacknowledged messages may hold (key inbox_bytes, default
	// DefaultInboxBytes, at least message_bytes). Zero means no limit.
	InboxBytes int64 `toml:"inbox_bytes"`
	// InboxSenderShare is the percentage of a recipient's quota
	// (inbox_messages and inbox_bytes alike) one sender's unacknowledged
	// messages to it may hold (key inbox_sender_share, 1..100, default
	// DefaultInboxSenderShare), so that one sender cannot fill an inbox
	// for the others; 100 gives each sender the whole quota.
	InboxSenderShare int `toml:"inbox_sender_share"`
	// MaxDelegationDepth bounds a delegation chain (key
	// max_delegation_depth, 1..MaxDelegationDepth, default
	// DefaultMaxDelegationDepth): a task submitted from inside a chain of
	// tasks that deep already (a top-level task is depth 1) is rejected
	// with delegation_too_deep. 1 allows no delegation from inside a task.
	MaxDelegationDepth int `toml:"max_delegation_depth"`
}

// DispatchPerCaller is the share of the dispatch slots one caller may
// hold: MaxDispatchPerCaller, or its default.
func (l LimitsConfig) DispatchPerCaller() int {
	if l.MaxDispatchPerCaller > 0 {
		return l.MaxDispatchPerCaller
	}
	return DefaultMaxDispatchPerCaller(l.MaxDispatch)
}

// DefaultMaxDispatchPerCaller is the default of max_dispatch_per_caller
// for a given max_dispatch: all but one slot, at least one.
func DefaultMaxDispatchPerCaller(maxDispatch int) int {
	return machine.DefaultMaxDispatchPerCaller(maxDispatch)
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
	// which breaks the lifecycle's at-most-once promise (a task is
	// dispatched once). FULL fsyncs every commit and closes that window,
	// at the cost of slower writes; it is the default for that reason.
	Synchronous string `toml:"synchronous"`
	// MinFreeBytes is the free space kept for acknowledgements, inbox
	// reads, transitions and pruning (key min_free_bytes, default
	// DefaultMinFreeBytes): once a new message or task would leave less
	// free on the home's filesystem (counting the pages free inside the
	// database), it is refused with storage_full. Zero turns the reserve
	// off: then only a full disk refuses writes, and a full disk refuses
	// every one of them, those that would empty it too.
	MinFreeBytes int64 `toml:"min_free_bytes"`
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
	DefaultStartTimeout     = dispatch.DefaultStartTimeout
	DefaultProbeTimeout     = dispatch.DefaultProbeTimeout
	DefaultMaxDispatch      = machine.DefaultMaxDispatch
	DefaultVerifiedWithin   = dispatch.DefaultVerifiedWithin
	DefaultSynchronous      = SynchronousFull
	DefaultInboxMessages    = persistence.DefaultInboxMessages
	DefaultInboxBytes       = persistence.DefaultInboxBytes
	DefaultInboxSenderShare = persistence.DefaultInboxSenderShare
	DefaultMinFreeBytes     = persistence.DefaultMinFreeBytes
	// DefaultMaxDelegationDepth and MaxDelegationDepth are the default
	// and the largest value of max_delegation_depth.
	DefaultMaxDelegationDepth = model.DefaultMaxDelegationDepth
	MaxDelegationDepth        = model.MaxDelegationDepth
	// MinReserveBytes is the least min_free_bytes other than 0: less
	// would not leave the writes that drain the store their room.
	MinReserveBytes               = persistence.MinReserveBytes
	DefaultAckedMessagesRetention = persistence.DefaultAckedMessagesRetention
	DefaultTerminalTasksRetention = persistence.DefaultTerminalTasksRetention
	DefaultAuditRetention         = persistence.DefaultAuditRetention
	// DefaultIdleTimeout is the daemon's: the daemon's idle exit lives in
	// cmd/relay, whose config this package is.
	DefaultIdleTimeout = 10 * time.Minute
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
// authority adapter; the default limits, storage mode and retention.
func DefaultConfig() Config {
	agents := make(map[string]AgentConfig, len(model.CoreAgents()))
	for _, name := range model.CoreAgents() {
		agents[name] = AgentConfig{Command: slices.Clone(defaultCommands[name]), Enabled: true, VerifiedWithin: DefaultVerifiedWithin}
	}
	return Config{
		Authority: AuthorityConfig{Timeout: DefaultAuthorityTimeout},
		Agents:    agents,
		Limits: LimitsConfig{
			MessageBytes:     DefaultMessageBytes,
			TaskTimeout:      DefaultTaskTimeout,
			StartTimeout:     DefaultStartTimeout,
			ProbeTimeout:     DefaultProbeTimeout,
			MaxDispatch:      DefaultMaxDispatch,
			InboxMessages:    DefaultInboxMessages,
			InboxBytes:       DefaultInboxBytes,
			InboxSenderShare: DefaultInboxSenderShare,

			MaxDelegationDepth: DefaultMaxDelegationDepth,
		},
		Storage: StorageConfig{Synchronous: DefaultSynchronous, MinFreeBytes: DefaultMinFreeBytes},
		Retention: RetentionConfig{AckedMessages: DefaultAckedMessagesRetention, TerminalTasks: DefaultTerminalTasksRetention,
			Audit: DefaultAuditRetention},
		Daemon: DaemonConfig{IdleTimeout: DefaultIdleTimeout},
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
//     daemon passes its pinned lookup: the safe entries of [daemon] path
//     or of the PATH pinned in the home, never the PATH of whoever
//     started it, never the current directory); a name not found is
//     kept as written, so the agent is reported configured-but-not-found
//     as before, and an authority adapter not found still fails to
//     start, closed;
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
	checks := c.valueChecks()
	// In the file's order: [authority] (its first two keys), the agents,
	// then the other tables.
	for i, k := range checks {
		if i == 2 {
			for _, name := range c.AgentNames() {
				key := toml.Key{"agents", name}
				if err := checkAgentName(name); err != nil {
					return bad(key.String(), agentNameHint, err)
				}
				if err := checkAgentArgv(c.Agents[name].Command); err != nil {
					return bad(append(key, "command").String(), leafHint("agents.*.command", name), err)
				}
			}
		}
		if k.err != nil {
			return bad(k.key, leafHint(k.key, ""), k.err)
		}
	}
	return nil
}

// keyCheck is one key's check in Validate: the key and what is wrong
// with its value (nil: nothing).
type keyCheck struct {
	key string
	err error
}

// valueChecks checks every value key of c, in the file's order, by the
// rules ParseConfig applies.
func (c Config) valueChecks() []keyCheck {
	l := c.Limits
	var authorityCommand error
	if len(c.Authority.Command) > 0 {
		authorityCommand = checkArgv(c.Authority.Command)
	}
	inboxBytes := atLeast(l.InboxBytes, 0, "0 or more")
	if inboxBytes == nil && l.InboxBytes > 0 && l.InboxBytes < int64(l.MessageBytes) {
		inboxBytes = fmt.Errorf("%d is less than limits.message_bytes (%d): a message of the largest size could never be delivered", l.InboxBytes, l.MessageBytes)
	}
	reserve := error(nil)
	if b := c.Storage.MinFreeBytes; b < 0 || b > 0 && b < MinReserveBytes {
		reserve = fmt.Errorf("want 0 or at least %d, got %d", MinReserveBytes, b)
	}
	return []keyCheck{
		{"authority.command", authorityCommand},
		{"authority.timeout", checkPositiveDuration(c.Authority.Timeout)},
		{"limits.message_bytes", atLeast(int64(l.MessageBytes), 1, "a positive integer")},
		{"limits.task_timeout", checkPositiveDuration(l.TaskTimeout)},
		{"limits.start_timeout", checkPositiveDuration(l.StartTimeout)},
		{"limits.probe_timeout", checkPositiveDuration(l.ProbeTimeout)},
		{"limits.max_dispatch", atLeast(int64(l.MaxDispatch), 1, "a positive integer")},
		{"limits.max_dispatch_per_caller", checkPerCaller(l)},
		{"limits.inbox_sender_share", within(int64(l.InboxSenderShare), 1, 100, "a percentage from 1 to 100")},
		{"limits.max_delegation_depth", within(int64(l.MaxDelegationDepth), 1, MaxDelegationDepth, fmt.Sprintf("an integer from 1 to %d", MaxDelegationDepth))},
		{"limits.inbox_messages", atLeast(int64(l.InboxMessages), 0, "0 or more")},
		{"limits.inbox_bytes", inboxBytes},
		{"storage.synchronous", checkSynchronous(c.Storage.Synchronous)},
		{"storage.min_free_bytes", reserve},
		{"retention.acked_messages", nonNegative(c.Retention.AckedMessages)},
		{"retention.audit", nonNegative(c.Retention.Audit)},
		{"retention.terminal_tasks", nonNegative(c.Retention.TerminalTasks)},
		{"daemon.idle_timeout", nonNegative(c.Daemon.IdleTimeout)},
		{"daemon.path", checkPathList(c.Daemon.Path)},
		{"daemon.env", checkEnvList(c.Daemon.Env, true)},
		{"authority.env", checkEnvList(c.Authority.Env, false)},
	}
}

// atLeast says why n is below lo ("want WHAT, got N"), or nil.
func atLeast(n, lo int64, what string) error {
	if n < lo {
		return fmt.Errorf("want %s, got %d", what, n)
	}
	return nil
}

// within says why n is outside lo..hi, or nil.
func within(n, lo, hi int64, what string) error {
	if n < lo || n > hi {
		return fmt.Errorf("want %s, got %d", what, n)
	}
	return nil
}

// nonNegative says why a duration is negative, or nil.
func nonNegative(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("want a duration of 0 or more, got %s", d)
	}
	return nil
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
