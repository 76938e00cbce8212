package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/hai-relay/relay/model"
)

// ParseConfig parses the TOML document data, the content of the config file
// called name (used in error messages), and merges it over DefaultConfig.
//
// The format is docs/config.md, every table and key optional: that file
// is leaves (below) rendered, by TestConfigReferenceGolden, so the keys
// it lists are exactly those this parser takes.
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
	d := newDecoder(name, &md, top)
	if err := d.check(); err != nil {
		return Config{}, err
	}
	cfg, err := d.decode()
	if err != nil {
		// Unreachable when check and the library agree on what decodes.
		return Config{}, &model.Error{Code: model.CodeInvalidConfig, Message: fmt.Sprintf("%s: %v", name, err),
			Hint: "give the key the message names a value of the type it takes (docs/config.md lists each key); " +
				"the relay's own check let this one through, a relay defect worth reporting with the file"}
	}
	// A custom agent has no default command; the first in the file without
	// one is reported at the first key that names it.
	for _, k := range md.Keys() {
		if len(k) < 2 || k[0] != "agents" {
			continue
		}
		if _, core := defaultCommands[k[1]]; core || md.IsDefined("agents", k[1], "command") {
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
		if !md.IsDefined(at...) {
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

// decoder checks one document, then has the TOML library decode it into a
// Config.
type decoder struct {
	name string
	md   *toml.MetaData
	top  map[string]toml.Primitive
	raw  map[string]any // the same tables, decoded as TOML values
}

func newDecoder(name string, md *toml.MetaData, top map[string]toml.Primitive) *decoder {
	d := &decoder{name: name, md: md, top: top, raw: map[string]any{}}
	for k, prim := range top {
		var v any
		_ = md.PrimitiveDecode(prim, &v)
		d.raw[k] = v
	}
	return d
}

// check returns the first problem in the document, in document order:
// MetaData.Keys lists the keys so, parents before children, and each key
// is checked after each of its parents (which the list may leave out: the
// agents of [agents.claude]), so that an unknown table or a bad agent name
// is reported once, at the first key that reaches it. The library would
// stop at the first bad value in map order, and it matches a key to a
// field case-insensitively (Max_Dispatch would be taken as max_dispatch;
// MetaData.Undecoded then counts it as decoded), while keys are
// case-sensitive here: so every key is checked against the field tags of
// its table before anything is decoded.
func (d *decoder) check() error {
	seen := map[string]bool{}
	for _, k := range d.md.Keys() {
		for i := 1; i <= len(k); i++ {
			p := k[:i]
			if seen[p.String()] {
				continue
			}
			seen[p.String()] = true
			if hint, msg := d.problem(p); msg != "" {
				return d.fail(k, p, hint, "%s", msg)
			}
		}
	}
	return nil
}

// problem says what is wrong with key k, whose parents are right, if
// anything: an unknown key, a bad agent name, a table that is not one, a
// bad value. A key inside a value (the tables of mcp_servers) is that
// value's check's to look at.
func (d *decoder) problem(k toml.Key) (hint, msg string) {
	parent, name := pattern(k[:len(k)-1]), k[len(k)-1]
	keys, inTable := schema[parent]
	switch {
	case !inTable:
		return "", ""
	case parent == "agents":
		if err := checkAgentName(name); err != nil {
			hint := agentNameHint
			if name == model.RelayAgent {
				hint = "choose another name: \"relay\" is the sender of the relay's own task notifications"
			}
			return hint, err.Error()
		}
	case !slices.Contains(keys, name):
		return unknown(k, keys)
	}
	v := d.value(k)
	if _, isTable := schema[pattern(k)]; isTable {
		if _, ok := v.(map[string]any); !ok {
			return tableHint(k), fmt.Sprintf("want a table, got %s", describe(v))
		}
		return "", ""
	}
	if err := leaves[pattern(k)].check(v); err != nil {
		return leafHint(pattern(k), agentOf(k)), err.Error()
	}
	return "", ""
}

// value returns the TOML value at k.
func (d *decoder) value(k toml.Key) any {
	v := d.raw[k[0]]
	for _, s := range k[1:] {
		m, _ := v.(map[string]any)
		v = m[s]
	}
	return v
}

// decode merges the checked document over DefaultConfig: the library
// decodes each table into its part of the Config, and each agent's table
// over the agent's defaults (a custom agent starts enabled, like the core
// ones, with the default verification age).
func (d *decoder) decode() (Config, error) {
	cfg := DefaultConfig()
	tables := map[string]any{"authority": &cfg.Authority, "limits": &cfg.Limits, "storage": &cfg.Storage,
		"retention": &cfg.Retention, "daemon": &cfg.Daemon}
	var errs []error
	for name, prim := range d.top {
		if name != "agents" {
			errs = append(errs, d.md.PrimitiveDecode(prim, tables[name]))
			continue
		}
		var agents map[string]toml.Primitive
		errs = append(errs, d.md.PrimitiveDecode(prim, &agents))
		for agent, prim := range agents {
			a, ok := cfg.Agents[agent]
			if !ok {
				a = AgentConfig{Enabled: true, VerifiedWithin: DefaultVerifiedWithin}
			}
			errs = append(errs, d.md.PrimitiveDecode(prim, &a))
			a.EnabledSet = d.md.IsDefined("agents", agent, "enabled")
			cfg.Agents[agent] = a
		}
	}
	return cfg, errors.Join(errs...)
}

// schema is the keys of each table of the format, by pattern ("agents.*"
// is any agent): the toml tags of Config's structs. Any name is a key of
// [agents]; checkAgentName checks it.
var schema = map[string][]string{
	"":          tags(reflect.TypeFor[Config]()),
	"agents":    nil,
	"agents.*":  tags(reflect.TypeFor[AgentConfig]()),
	"authority": tags(reflect.TypeFor[AuthorityConfig]()),
	"limits":    tags(reflect.TypeFor[LimitsConfig]()),
	"storage":   tags(reflect.TypeFor[StorageConfig]()),
	"retention": tags(reflect.TypeFor[RetentionConfig]()),
	"daemon":    tags(reflect.TypeFor[DaemonConfig]()),
}

// tags returns the toml tags of struct type t, sorted: the keys of its table.
func tags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("toml"); tag != "" && tag != "-" {
			out = append(out, tag)
		}
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

// checked turns a value's parser (values.go) into its check.
func checked[T any](parse func(any) (T, error)) func(any) error {
	return func(v any) error {
		_, err := parse(v)
		return err
	}
}

// checkEnv checks an env list: [daemon] env (daemon) may not name PATH.
func checkEnv(daemon bool) func(any) error {
	return func(v any) error {
		env, err := parseEnvList(v)
		if err != nil {
			return err
		}
		return checkEnvList(env, daemon)
	}
}

func checkBool(v any) error {
	if _, ok := v.(bool); !ok {
		return fmt.Errorf("want true or false, got %s", describe(v))
	}
	return nil
}

func checkSynchronousValue(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want %q or %q, got %s", SynchronousFull, SynchronousNormal, describe(v))
	}
	return checkSynchronous(s)
}

// leaf is a value key of the format.
type leaf struct {
	// check says what is wrong with a value, as the TOML library decoded
	// it, in the key's own terms.
	check func(any) error
	// want says what the key takes, for the hint of a bad value.
	want string
	// example is a valid line for the key.
	example string
}

// leaves are the value keys, by schema pattern ("agents.*" is any agent);
// a test keeps them in step with the fields of Config.
var leaves = map[string]leaf{
	"authority.command": {
		check:   checked(parseArgv),
		want:    "the authority adapter's argv, run without a shell (no adapter: every task is blocked, authority_not_configured; docs/authority.md)",
		example: `command = ["hai-authority", "--relay"]`,
	},
	"authority.env": {
		check:   checkEnv(false),
		want:    `an array of "NAME" (passed from the daemon's environment; an autostarted daemon has it only if [daemon] env lists it too) or "NAME=value" entries: the adapter's environment is PATH, HOME, LANG and TZ plus these`,
		example: `env = ["HAI_AUTHORITY_TOKEN", "HAI_AUTHORITY_URL=http://127.0.0.1:8700"]`,
	},
	"authority.timeout": {
		check:   checked(parseDuration),
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultAuthorityTimeout) + ")",
		example: `timeout = "5s"`,
	},
	"agents.*.command": {
		check:   checked(parseAgentArgv),
		want:    "the agent's ACP adapter argv, run without a shell: a bare name is found through the daemon's PATH, a relative path with a slash against the home",
		example: "", // built by leafHint from the agent's name
	},
	"agents.*.enabled": {
		check:   checkBool,
		want:    "true or false (default true)",
		example: `enabled = true`,
	},
	"agents.*.require_verified": {
		check:   checkBool,
		want:    "true or false (default false): block tasks (agent_not_verified) unless the agent's last `relay agents verify` passed, within verified_within, on the very adapter files installed now",
		example: `require_verified = true`,
	},
	"agents.*.verified_within": {
		check:   checked(parseDuration),
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultVerifiedWithin) + "): how old a passed verification may be for require_verified",
		example: `verified_within = "720h"`,
	},
	"agents.*.mcp_servers": {
		check:   checked(parseMCPServers),
		want:    "an array of {name, command, env} tables: stdio MCP servers passed to state_changing tasks only, their tools pre-approved (never taken from the agent's own settings)",
		example: `mcp_servers = [{name = "hai", command = ["hai-mcp", "serve"], env = {HAI_LEASE_MODE = "guarded"}}]`,
	},
	"limits.message_bytes": {
		check:   checked(parsePositiveInt),
		want:    fmt.Sprintf("a positive number of bytes (default %d)", DefaultMessageBytes),
		example: fmt.Sprintf("message_bytes = %d", DefaultMessageBytes),
	},
	"limits.task_timeout": {
		check:   checked(parseDuration),
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultTaskTimeout) + ")",
		example: `task_timeout = "30m"`,
	},
	"limits.start_timeout": {
		check: checked(parseDuration),
		want: "a positive Go duration (default " + model.ShortDuration(DefaultStartTimeout) + "): how long an agent may take " +
			"to answer initialize and session/new (and have its session's mode set) before it is killed (agent_start_timeout)",
		example: `start_timeout = "60s"`,
	},
	"limits.probe_timeout": {
		check:   checked(parseDuration),
		want:    "a positive Go duration (default " + model.ShortDuration(DefaultProbeTimeout) + ")",
		example: `probe_timeout = "60s"`,
	},
	"limits.max_dispatch": {
		check:   checked(parsePositiveInt),
		want:    fmt.Sprintf("a positive number of tasks run at once (default %d)", DefaultMaxDispatch),
		example: fmt.Sprintf("max_dispatch = %d", DefaultMaxDispatch),
	},
	"limits.max_dispatch_per_caller": {
		check: checked(parsePositiveInt),
		want: "a positive number of tasks, at most max_dispatch (default max_dispatch - 1, at least 1): " +
			"how many dispatch slots the tasks of one caller may hold at once",
		example: fmt.Sprintf("max_dispatch_per_caller = %d", DefaultMaxDispatchPerCaller(DefaultMaxDispatch)),
	},
	"limits.max_delegation_depth": {
		check: checked(parseDepth),
		want: fmt.Sprintf("an integer from 1 to %d (default %d): how many tasks deep a delegation chain may go, a task submitted "+
			"outside any task being depth 1; a task submitted from inside a chain that deep already is rejected (delegation_too_deep), "+
			"and 1 allows no delegation from inside a task", MaxDelegationDepth, DefaultMaxDelegationDepth),
		example: fmt.Sprintf("max_delegation_depth = %d", DefaultMaxDelegationDepth),
	},
	"daemon.path": {
		check:   checked(parsePathList),
		want:    "an array of absolute directories: the PATH agent commands are found through and the daemon's children get (default: the PATH the first `relay daemon` by hand pinned in the home)",
		example: `path = ["/home/me/.local/bin", "/usr/local/bin", "/usr/bin", "/bin"]`,
	},
	"daemon.env": {
		check:   checkEnv(true),
		want:    `an array of "NAME" (taken from the environment of whoever starts the daemon: for an autostarted one, the facade's, which any project's MCP config can set) or "NAME=value" entries, added to the daemon's environment and so its agents'`,
		example: `env = ["ANTHROPIC_API_KEY", "HTTPS_PROXY=http://proxy.example:3128"]`,
	},
	"limits.inbox_messages": {
		check:   checked(parseNonNegativeInt),
		want:    fmt.Sprintf("a number of messages, 0 for no limit (default %d): how many unacknowledged messages one recipient may hold before messages to it are refused (recipient_inbox_full)", DefaultInboxMessages),
		example: fmt.Sprintf("inbox_messages = %d", DefaultInboxMessages),
	},
	"limits.inbox_bytes": {
		check:   checked(parseNonNegativeInt),
		want:    fmt.Sprintf("a number of bytes, at least message_bytes, 0 for no limit (default %d): how many bytes of bodies one recipient's unacknowledged messages may hold", DefaultInboxBytes),
		example: fmt.Sprintf("inbox_bytes = %d", DefaultInboxBytes),
	},
	"limits.inbox_sender_share": {
		check: checked(parseShare),
		want: fmt.Sprintf("a percentage from 1 to 100 (default %d): how much of a recipient's quota (inbox_messages and inbox_bytes alike) "+
			"one sender's unacknowledged messages to it may hold, so that one sender cannot fill an inbox for the others; 100 is the whole quota", DefaultInboxSenderShare),
		example: fmt.Sprintf("inbox_sender_share = %d", DefaultInboxSenderShare),
	},
	"storage.min_free_bytes": {
		check:   checked(parseReserve),
		want:    fmt.Sprintf("a number of bytes, 0 for no reserve or at least %d (default %d): the free space kept for acknowledgements and pruning; new messages and tasks are refused (storage_full) below it", MinReserveBytes, DefaultMinFreeBytes),
		example: fmt.Sprintf("min_free_bytes = %d", DefaultMinFreeBytes),
	},
	"retention.acked_messages": {
		check:   checked(parseKeep),
		want:    "a Go duration, 0 to keep forever (default " + model.ShortDuration(DefaultAckedMessagesRetention) + "): how long an acknowledged message is kept after its acknowledgement",
		example: `acked_messages = "720h"`,
	},
	"retention.audit": {
		check:   checked(parseKeep),
		want:    "a Go duration, 0 to keep the whole log (default " + model.ShortDuration(DefaultAuditRetention) + "): how long an audit row is kept; older rows are cut from the start of the chain behind a checkpoint that keeps their digest, and relay audit verify still passes",
		example: `audit = "8760h"`,
	},
	"retention.terminal_tasks": {
		check:   checked(parseKeep),
		want:    "a Go duration, 0 to keep forever (default " + model.ShortDuration(DefaultTerminalTasksRetention) + "): how long a task is kept after it ended, with its events, verdicts and agent log",
		example: `terminal_tasks = "2160h"`,
	},
	"daemon.idle_timeout": {
		check:   checked(parseIdleTimeout),
		want:    "a Go duration, 0 for never (default " + model.ShortDuration(DefaultIdleTimeout) + "): how long a daemon a facade started stays up with no facade connected and no task running or queued",
		example: `idle_timeout = "10m"`,
	},
	"storage.synchronous": {
		check:   checkSynchronousValue,
		want:    fmt.Sprintf("%q or %q (default %q): %s fsyncs every commit (power-loss safe); %s may lose the last commits on an OS crash or power loss", SynchronousFull, SynchronousNormal, DefaultSynchronous, SynchronousFull, SynchronousNormal),
		example: `synchronous = "FULL"`,
	},
}

// leafHint is the hint shown with a bad value of the schema key pattern.
func leafHint(pattern, agent string) string {
	l, ok := leaves[pattern]
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

// unknown is the problem of k, a key of a table whose keys are siblings
// that is none of them.
func unknown(k toml.Key, siblings []string) (hint, msg string) {
	msg = "unknown key"
	if s := suggest(k[len(k)-1], siblings); s != "" {
		if strings.EqualFold(s, k[len(k)-1]) {
			msg += " (keys are case-sensitive; "
		} else {
			msg += " ("
		}
		msg += fmt.Sprintf("did you mean %s?)", s)
	}
	if len(k) == 1 {
		return "the tables are [authority], [agents.NAME], [limits], [storage], [retention] and [daemon]", msg
	}
	return fmt.Sprintf("remove it or fix its spelling; the keys of [%s] are %s", k[:len(k)-1], strings.Join(siblings, ", ")), msg
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
