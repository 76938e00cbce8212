package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hai-relay/relay/model"
)

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
//	start_timeout = "60s"                   # initialize + session/new (+ the mode): then agent_start_timeout
//	probe_timeout = "60s"
//	max_dispatch = 4                        # integer > 0
//	max_dispatch_per_caller = 3             # 1..max_dispatch; default max_dispatch - 1 (at least 1)
//
//	max_delegation_depth = 3                # 1..16: how deep a chain of tasks submitted from inside tasks may go
//
//	inbox_messages = 1000                   # integer >= 0; 0 = no limit
//	inbox_bytes = 67108864                  # integer >= 0 (>= message_bytes); 0 = no limit
//
//	[storage]
//	synchronous = "NORMAL"                  # or "FULL"; see StorageConfig
//	min_free_bytes = 67108864               # 0 = no reserve, else >= 16777216
//
//	[retention]
//	acked_messages = "720h"                 # Go duration, >= 0; "0" = keep forever
//	terminal_tasks = "2160h"                # Go duration, >= 0; "0" = keep forever
//
//	[daemon]
//	idle_timeout = "10m"                    # Go duration, >= 0; "0" = never
//	path = ["/usr/local/bin", "/usr/bin"]   # absolute dirs; absent: the pinned PATH
//	env = ["ANTHROPIC_API_KEY", "TZ=UTC"]   # NAME (taken from the starter) or NAME=value
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
	d := &decoder{name: name, md: &md, top: top, problems: map[string]problem{}}
	f := d.decode()
	// The decode visits the tables in map order and records every problem
	// it meets; the first in the file is the one reported.
	// MetaData.Keys lists every key in document order, parents before
	// children; a problem found at a key's parent (an unknown table, a bad
	// agent name) is reported at the first key that reaches it.
	for _, k := range md.Keys() {
		for i := 1; i <= len(k); i++ {
			if pr, ok := d.problems[k[:i].String()]; ok {
				return Config{}, d.fail(k, pr.key, pr.hint, "%s", pr.msg)
			}
		}
	}
	cfg := DefaultConfig()
	f.apply(&cfg)
	// A custom agent has no default command; the first in the file without
	// one is reported at the first key that names it.
	for _, k := range md.Keys() {
		if len(k) < 2 || k[0] != "agents" {
			continue
		}
		a := f.Agents[k[1]]
		if _, core := defaultCommands[k[1]]; core || a == nil || a.Command.set {
			continue
		}
		return Config{}, d.fail(k, toml.Key{"agents", k[1], "command"}, leafHint("agents.*.command", k[1]),
			"custom agent %q has no command; only the core agents have a default", k[1])
	}
	// The share of one caller is checked against max_dispatch, wherever
	// either is written.
	if err := checkPerCaller(cfg.Limits); err != nil {
		k := toml.Key{"limits", "max_dispatch_per_caller"}
		return Config{}, d.fail(k, k, leafHint(pattern(k), ""), "%s", err)
	}
	// One rule spans two keys: a recipient's byte quota must hold one
	// message of the largest size. It is reported at whichever of the
	// two the file set (inbox_bytes if both).
	if b := cfg.Limits.InboxBytes; b > 0 && b < int64(cfg.Limits.MessageBytes) {
		at := toml.Key{"limits", "inbox_bytes"}
		if !f.Limits.InboxBytes.set {
			at = toml.Key{"limits", "message_bytes"}
		}
		return Config{}, d.fail(at, at, leafHint("limits.inbox_bytes", ""),
			"inbox_bytes %d is less than message_bytes %d: a message of the largest size could never be delivered", b, cfg.Limits.MessageBytes)
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

// file is config.toml as written: one field per key of the format, named by
// its toml tag, which the TOML library decodes into. The tags are also the
// exact-key allow-list (schema). Each value field is a type that checks the
// TOML value it is given and keeps whether the file set it, so that apply
// merges only what was written.
type file struct {
	Authority authorityTable         `toml:"authority"`
	Agents    map[string]*agentTable `toml:"agents"`
	Limits    limitsTable            `toml:"limits"`
	Storage   storageTable           `toml:"storage"`
	Retention retentionTable         `toml:"retention"`
	Daemon    daemonTable            `toml:"daemon"`
}

type authorityTable struct {
	Command argvValue     `toml:"command"`
	Env     envValue      `toml:"env"`
	Timeout durationValue `toml:"timeout"`
}

type agentTable struct {
	Command         argvValue     `toml:"command"`
	Enabled         boolValue     `toml:"enabled"`
	MCPServers      mcpValue      `toml:"mcp_servers"`
	RequireVerified boolValue     `toml:"require_verified"`
	VerifiedWithin  durationValue `toml:"verified_within"`
}

type limitsTable struct {
	InboxBytes    sizeValue     `toml:"inbox_bytes"`
	InboxMessages sizeValue     `toml:"inbox_messages"`
	MaxDispatch   countValue    `toml:"max_dispatch"`
	MaxDepth      depthValue    `toml:"max_delegation_depth"`
	PerCaller     countValue    `toml:"max_dispatch_per_caller"`
	MessageBytes  countValue    `toml:"message_bytes"`
	ProbeTimeout  durationValue `toml:"probe_timeout"`
	StartTimeout  durationValue `toml:"start_timeout"`
	TaskTimeout   durationValue `toml:"task_timeout"`
}

type storageTable struct {
	MinFreeBytes reserveValue `toml:"min_free_bytes"`
	Synchronous  syncValue    `toml:"synchronous"`
}

type retentionTable struct {
	AckedMessages keepValue `toml:"acked_messages"`
	TerminalTasks keepValue `toml:"terminal_tasks"`
}

type daemonTable struct {
	Env         daemonEnvValue `toml:"env"`
	IdleTimeout idleValue      `toml:"idle_timeout"`
	Path        pathValue      `toml:"path"`
}

// apply merges what the file set over cfg. A custom agent starts enabled,
// like the core ones, with the default verification age.
func (f *file) apply(cfg *Config) {
	au := &cfg.Authority
	f.Authority.Command.merge(&au.Command)
	f.Authority.Env.merge(&au.Env)
	f.Authority.Timeout.merge(&au.Timeout)
	for name, t := range f.Agents {
		a, ok := cfg.Agents[name]
		if !ok {
			a = AgentConfig{Enabled: true, VerifiedWithin: DefaultVerifiedWithin}
		}
		t.Command.merge(&a.Command)
		t.Enabled.merge(&a.Enabled)
		a.EnabledSet = a.EnabledSet || t.Enabled.set
		t.MCPServers.merge(&a.MCPServers)
		t.RequireVerified.merge(&a.RequireVerified)
		t.VerifiedWithin.merge(&a.VerifiedWithin)
		cfg.Agents[name] = a
	}
	f.Limits.MaxDispatch.merge(&cfg.Limits.MaxDispatch)
	f.Limits.PerCaller.merge(&cfg.Limits.MaxDispatchPerCaller)
	f.Limits.MaxDepth.merge(&cfg.Limits.MaxDelegationDepth)
	f.Limits.MessageBytes.merge(&cfg.Limits.MessageBytes)
	f.Limits.ProbeTimeout.merge(&cfg.Limits.ProbeTimeout)
	f.Limits.TaskTimeout.merge(&cfg.Limits.TaskTimeout)
	f.Limits.StartTimeout.merge(&cfg.Limits.StartTimeout)
	if f.Limits.InboxMessages.set {
		cfg.Limits.InboxMessages = int(f.Limits.InboxMessages.v)
	}
	f.Limits.InboxBytes.merge(&cfg.Limits.InboxBytes)
	f.Storage.Synchronous.merge(&cfg.Storage.Synchronous)
	f.Storage.MinFreeBytes.merge(&cfg.Storage.MinFreeBytes)
	f.Retention.AckedMessages.merge(&cfg.Retention.AckedMessages)
	f.Retention.TerminalTasks.merge(&cfg.Retention.TerminalTasks)
	f.Daemon.IdleTimeout.merge(&cfg.Daemon.IdleTimeout)
	f.Daemon.Path.merge(&cfg.Daemon.Path)
	f.Daemon.Env.merge(&cfg.Daemon.Env)
}

// value is one key's value as the file set it, and what is wrong with it.
type value[T any] struct {
	v   T
	set bool
	err error
}

func (x *value[T]) merge(dst *T) {
	if x.set {
		*dst = x.v
	}
}

// keep records a checked value and its problem, if any. The problem is
// kept rather than returned, so that the library decodes every key and the
// first problem in the file can be reported, not the first in map order.
func (x *value[T]) keep(v T, err error) error {
	x.v, x.set, x.err = v, true, err
	return nil
}

// problem is what keep recorded as wrong.
func (x *value[T]) problem() error { return x.err }

// The value types: each UnmarshalTOML is given the decoded TOML value (a
// string, int64, float64, bool, datetime, []any or map[string]any) and says
// what is wrong with it in the key's own terms.
type (
	argvValue     struct{ value[[]string] }
	envValue      struct{ value[[]string] }
	durationValue struct{ value[time.Duration] }
	countValue    struct{ value[int] }
	depthValue    struct{ value[int] }
	boolValue     struct{ value[bool] }
	mcpValue      struct{ value[[]MCPServer] }
	syncValue     struct{ value[string] }
	idleValue     struct{ value[time.Duration] }
	pathValue     struct{ value[[]string] }
	// daemonEnvValue is [daemon] env: an env list that may not name PATH.
	daemonEnvValue struct{ value[[]string] }
	sizeValue      struct{ value[int64] }
	reserveValue   struct{ value[int64] }
	keepValue      struct{ value[time.Duration] }
)

func (x *argvValue) UnmarshalTOML(v any) error      { return x.keep(parseArgv(v)) }
func (x *envValue) UnmarshalTOML(v any) error       { return x.keep(parseEnvKeys(v, false)) }
func (x *daemonEnvValue) UnmarshalTOML(v any) error { return x.keep(parseEnvKeys(v, true)) }
func (x *pathValue) UnmarshalTOML(v any) error      { return x.keep(parsePathList(v)) }
func (x *durationValue) UnmarshalTOML(v any) error  { return x.keep(parseDuration(v)) }
func (x *countValue) UnmarshalTOML(v any) error     { return x.keep(parsePositiveInt(v)) }
func (x *depthValue) UnmarshalTOML(v any) error     { return x.keep(parseDepth(v)) }
func (x *idleValue) UnmarshalTOML(v any) error      { return x.keep(parseIdleTimeout(v)) }
func (x *sizeValue) UnmarshalTOML(v any) error      { return x.keep(parseNonNegativeInt(v)) }
func (x *keepValue) UnmarshalTOML(v any) error      { return x.keep(parseKeep(v)) }
func (x *reserveValue) UnmarshalTOML(v any) error   { return x.keep(parseReserve(v)) }
func (x *mcpValue) UnmarshalTOML(v any) error       { return x.keep(parseMCPServers(v)) }

// parseEnvKeys is parseEnvList, then checkEnvList.
func parseEnvKeys(v any, daemon bool) ([]string, error) {
	env, err := parseEnvList(v)
	if err != nil {
		return env, err
	}
	return env, checkEnvList(env, daemon)
}

func (x *boolValue) UnmarshalTOML(v any) error {
	b, ok := v.(bool)
	if !ok {
		return x.keep(false, fmt.Errorf("want true or false, got %s", describe(v)))
	}
	return x.keep(b, nil)
}

func (x *syncValue) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return x.keep("", fmt.Errorf("want %q or %q, got %s", SynchronousFull, SynchronousNormal, describe(v)))
	}
	return x.keep(s, checkSynchronous(s))
}

// problem is what is wrong at one key of the file.
type problem struct {
	key  toml.Key
	hint string
	msg  string
}

// decoder decodes one document into a file.
type decoder struct {
	name     string
	md       *toml.MetaData
	top      map[string]toml.Primitive
	problems map[string]problem // by key
}

// decode has the TOML library decode each table of the document into its
// struct of the file, and records every problem: a table that is not one,
// a bad agent name, a bad value, an unknown key.
func (d *decoder) decode() *file {
	f := &file{Agents: map[string]*agentTable{}}
	tables := map[string]any{"authority": &f.Authority, "limits": &f.Limits, "storage": &f.Storage, "retention": &f.Retention, "daemon": &f.Daemon}
	for name, prim := range d.top {
		k := toml.Key{name}
		dst, known := tables[name]
		switch {
		case name == "agents" && d.isTable(k, prim):
			d.agents(prim, f.Agents)
		case known && d.isTable(k, prim):
			_ = d.md.PrimitiveDecode(prim, dst) // the value types keep their problems
			d.values(k, dst)
		}
	}
	d.unknownKeys()
	return f
}

// agents decodes [agents], one table per agent under its name, into dst.
func (d *decoder) agents(prim toml.Primitive, dst map[string]*agentTable) {
	var m map[string]toml.Primitive
	_ = d.md.PrimitiveDecode(prim, &m)
	for agent, prim := range m {
		k := toml.Key{"agents", agent}
		if err := checkAgentName(agent); err != nil {
			hint := agentNameHint
			if agent == model.RelayAgent {
				hint = "choose another name: \"relay\" is the sender of the relay's own task notifications"
			}
			d.problem(k, hint, err.Error())
			continue
		}
		if !d.isTable(k, prim) {
			continue
		}
		a := &agentTable{}
		_ = d.md.PrimitiveDecode(prim, a)
		d.values(k, a)
		dst[agent] = a
	}
}

// isTable reports whether the value at k is a table, or records that it is
// not. The library would decode an array of tables into a table's struct
// as if it were empty.
func (d *decoder) isTable(k toml.Key, prim toml.Primitive) bool {
	if d.md.Type(k...) == "Hash" {
		return true
	}
	var v any
	_ = d.md.PrimitiveDecode(prim, &v)
	if _, ok := v.(map[string]any); ok {
		return true // a table made implicitly, by a dotted key
	}
	d.problem(k, tableHint(k), fmt.Sprintf("want a table, got %s", describe(v)))
	return false
}

// values records the problems the value types of table, the struct decoded
// at key k, kept.
func (d *decoder) values(k toml.Key, table any) {
	v := reflect.ValueOf(table).Elem()
	for i := range v.NumField() {
		fk := append(slices.Clip(k), v.Type().Field(i).Tag.Get("toml"))
		if x, ok := v.Field(i).Addr().Interface().(interface{ problem() error }); ok && x.problem() != nil {
			d.problem(fk, leafHint(pattern(fk), agentOf(fk)), x.problem().Error())
		}
	}
}

// schema is the keys of each table of the file, by pattern ("agents.*" is
// any agent). Any name is a key of [agents]: checkAgentName checks them.
var schema = map[string][]string{
	"":          tags(reflect.TypeFor[file]()),
	"agents":    nil,
	"authority": tags(reflect.TypeFor[authorityTable]()),
	"agents.*":  tags(reflect.TypeFor[agentTable]()),
	"limits":    tags(reflect.TypeFor[limitsTable]()),
	"storage":   tags(reflect.TypeFor[storageTable]()),
	"retention": tags(reflect.TypeFor[retentionTable]()),
	"daemon":    tags(reflect.TypeFor[daemonTable]()),
}

// unknownKeys records every key of the document that is not a key of its
// table, at the shortest such prefix (an unknown table, not each of its
// keys). This is MetaData.Undecoded made exact: the library also matches a
// field case-insensitively (Max_Dispatch would be taken as max_dispatch),
// and counts such a key as decoded, while keys are case-sensitive here.
// A key inside a value (the tables of mcp_servers) is the value's to check.
func (d *decoder) unknownKeys() {
	for _, k := range d.md.Keys() {
		for i := range k {
			keys, isTable := schema[pattern(k[:i])]
			if !isTable {
				break
			}
			if keys != nil && !slices.Contains(keys, k[i]) {
				d.unknown(k[:i+1], keys)
				break
			}
		}
	}
}

func (d *decoder) problem(k toml.Key, hint, msg string) {
	d.problems[k.String()] = problem{key: k, hint: hint, msg: msg}
}

// tags returns the toml tags of struct type t, sorted: the keys of its table.
func tags(t reflect.Type) []string {
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Tag.Get("toml")
	}
	slices.Sort(out)
	return out
}

// agentOf returns the agent's name for a key under [agents.NAME], or "".
func agentOf(k toml.Key) string {
	if len(k) >= 2 && k[0] == "agents" {
		return k[1]
	}
	return ""
}

// hint is what the hint of a bad value says about its key.
type hint struct {
	// want says what the key takes.
	want string
	// example is a valid line for the key.
	example string
}

// hints are the value keys' hints, by schema pattern ("agents.*" is any
// agent); a test keeps them in step with the file's fields.
var hints = map[string]hint{
	"authority.command": {
		want:    "the authority adapter's argv, run without a shell",
		example: `command = ["hai-authority", "--relay"]`,
	},
	"authority.env": {
		want:    `an array of "NAME" (passed from the daemon's environment) or "NAME=value" entries`,
		example: `env = ["HAI_AUTHORITY_TOKEN", "HAI_AUTHORITY_URL=http://127.0.0.1:8700"]`,
	},
	"authority.timeout": {
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultAuthorityTimeout) + ")",
		example: `timeout = "5s"`,
	},
	"agents.*.command": {
		want:    "the agent's ACP adapter argv, run without a shell",
		example: "", // built by leafHint from the agent's name
	},
	"agents.*.enabled": {
		want:    "true or false (default true)",
		example: `enabled = true`,
	},
	"agents.*.require_verified": {
		want:    "true or false (default false): block tasks unless the agent's last `relay agents verify` passed, recently, on the installed adapter",
		example: `require_verified = true`,
	},
	"agents.*.verified_within": {
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultVerifiedWithin) + "): how old a passed verification may be for require_verified",
		example: `verified_within = "720h"`,
	},
	"agents.*.mcp_servers": {
		want:    "an array of {name, command, env} tables: stdio MCP servers passed to state_changing tasks",
		example: `mcp_servers = [{name = "hai", command = ["hai-mcp", "serve"], env = {HAI_LEASE_MODE = "guarded"}}]`,
	},
	"limits.message_bytes": {
		want:    fmt.Sprintf("a positive number of bytes (default %d)", DefaultMessageBytes),
		example: fmt.Sprintf("message_bytes = %d", DefaultMessageBytes),
	},
	"limits.task_timeout": {
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultTaskTimeout) + ")",
		example: `task_timeout = "30m"`,
	},
	"limits.start_timeout": {
		want: "a positive Go duration (default " + model.ShortDuration(DefaultStartTimeout) + "): how long an agent may take " +
			"to answer initialize and session/new (and have its session's mode set) before it is killed (agent_start_timeout)",
		example: `start_timeout = "60s"`,
	},
	"limits.probe_timeout": {
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultProbeTimeout) + ")",
		example: `probe_timeout = "60s"`,
	},
	"limits.max_dispatch": {
		want:    fmt.Sprintf("a positive number of tasks run at once (default %d)", DefaultMaxDispatch),
		example: fmt.Sprintf("max_dispatch = %d", DefaultMaxDispatch),
	},
	"limits.max_dispatch_per_caller": {
		want: "a positive number of tasks, at most max_dispatch (default max_dispatch - 1, at least 1): " +
			"how many dispatch slots the tasks of one caller may hold at once",
		example: fmt.Sprintf("max_dispatch_per_caller = %d", DefaultMaxDispatchPerCaller(DefaultMaxDispatch)),
	},
	"limits.max_delegation_depth": {
		want: fmt.Sprintf("an integer from 1 to %d (default %d): how many tasks deep a delegation chain may go, a task submitted "+
			"outside any task being depth 1; a task submitted from inside a chain that deep already is rejected (delegation_too_deep), "+
			"and 1 allows no delegation from inside a task", MaxDelegationDepth, DefaultMaxDelegationDepth),
		example: fmt.Sprintf("max_delegation_depth = %d", DefaultMaxDelegationDepth),
	},
	"daemon.path": {
		want:    "an array of absolute directories: the PATH agent commands are found through and the daemon's children get (default: the PATH the first `relay daemon` by hand pinned in the home)",
		example: `path = ["/home/me/.local/bin", "/usr/local/bin", "/usr/bin", "/bin"]`,
	},
	"daemon.env": {
		want:    `an array of "NAME" (taken from the environment of whoever starts the daemon: for an autostarted one, the facade's, which any project's MCP config can set) or "NAME=value" entries, added to the daemon's environment and so its agents'`,
		example: `env = ["ANTHROPIC_API_KEY", "HTTPS_PROXY=http://proxy.example:3128"]`,
	},
	"limits.inbox_messages": {
		want:    fmt.Sprintf("a number of messages, 0 for no limit (default %d): how many unacknowledged messages one recipient may hold before messages to it are refused (recipient_inbox_full)", DefaultInboxMessages),
		example: fmt.Sprintf("inbox_messages = %d", DefaultInboxMessages),
	},
	"limits.inbox_bytes": {
		want:    fmt.Sprintf("a number of bytes, at least message_bytes, 0 for no limit (default %d): how many bytes of bodies one recipient's unacknowledged messages may hold", DefaultInboxBytes),
		example: fmt.Sprintf("inbox_bytes = %d", DefaultInboxBytes),
	},
	"storage.min_free_bytes": {
		want:    fmt.Sprintf("a number of bytes, 0 for no reserve or at least %d (default %d): the free space kept for acknowledgements and pruning; new messages and tasks are refused (storage_full) below it", MinReserveBytes, DefaultMinFreeBytes),
		example: fmt.Sprintf("min_free_bytes = %d", DefaultMinFreeBytes),
	},
	"retention.acked_messages": {
		want:    "a Go duration, 0 to keep forever (default " + model.ShortDuration(DefaultAckedMessagesRetention) + "): how long an acknowledged message is kept after its acknowledgement",
		example: `acked_messages = "720h"`,
	},
	"retention.terminal_tasks": {
		want:    "a Go duration, 0 to keep forever (default " + model.ShortDuration(DefaultTerminalTasksRetention) + "): how long a task is kept after it ended, with its events, verdicts and agent log",
		example: `terminal_tasks = "2160h"`,
	},
	"daemon.idle_timeout": {
		want:    "a Go duration, 0 for never (default " + model.ShortDuration(DefaultIdleTimeout) + "): how long a daemon a facade started stays up with no facade connected and no task running or queued",
		example: `idle_timeout = "10m"`,
	},
	"storage.synchronous": {
		want:    fmt.Sprintf("%q or %q (default %q)", SynchronousFull, SynchronousNormal, DefaultSynchronous),
		example: `synchronous = "FULL"`,
	},
}

// leafHint is the hint shown with a bad value of the schema key pattern.
func leafHint(pattern, agent string) string {
	l, ok := hints[pattern]
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

// tableHint is the hint for a table key whose value is not a table.
func tableHint(k toml.Key) string {
	if k[0] == "agents" && len(k) == 1 {
		return "agents are configured one table each: [agents.NAME]"
	}
	return fmt.Sprintf("write [%s] as a table header followed by its keys", k)
}

// unknown records k, a key of a table whose keys are siblings.
func (d *decoder) unknown(k toml.Key, siblings []string) {
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
		hint = "the tables are [authority], [agents.NAME], [limits], [storage], [retention] and [daemon]"
	default:
		hint = fmt.Sprintf("remove it or fix its spelling; the keys of [%s] are %s",
			k[:len(k)-1], strings.Join(siblings, ", "))
	}
	d.problem(k, hint, msg)
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

// line returns the line of key k in the file, or 0 when the library does
// not know it (an implicit table, such as agents in [agents.claude]). The
// library keeps key positions to itself; it reports one only in the error
// of a value that fails to decode, so the value of k is looked up and
// decoded into a lineProbe.
func (d *decoder) line(k toml.Key) int {
	m := d.top
	for i, s := range k {
		v, ok := m[s]
		if !ok {
			return 0
		}
		if i == len(k)-1 {
			var pe toml.ParseError
			if errors.As(d.md.PrimitiveDecode(v, &lineProbe{}), &pe) {
				return pe.Position.Line
			}
			return 0
		}
		// Decoding a non-table into a map leaves it empty, and the next
		// lookup then fails.
		m = map[string]toml.Primitive{}
		if err := d.md.PrimitiveDecode(v, &m); err != nil {
			return 0
		}
	}
	return 0
}

// lineProbe fails to decode, so that the TOML library reports the position
// of the key it was asked to decode.
type lineProbe struct{}

var errLineProbe = errors.New("line probe")

func (*lineProbe) UnmarshalTOML(any) error { return errLineProbe }

// fail builds the error for a problem with key, located at the line of at.
func (d *decoder) fail(at, key toml.Key, hint, format string, args ...any) error {
	loc := d.name
	if line := d.line(at); line > 0 {
		loc = fmt.Sprintf("%s:%d", d.name, line)
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
