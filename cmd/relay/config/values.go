package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

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

// checkEnvList refuses an env list that names a code-loading variable
// (model.CodeLoadingVar), which never reaches anything the relay starts,
// or, for [daemon] env (daemon), PATH, which is [daemon] path's.
func checkEnvList(env []string, daemon bool) error {
	for i, e := range env {
		name, _, _ := strings.Cut(e, "=")
		switch {
		case model.CodeLoadingVar(name):
			return fmt.Errorf("element %d names %s, a variable that makes programs load code; the relay never passes one on "+
				"(to use it for an agent, set it in a wrapper script and make that script the agent's command)", i, name)
		case daemon && name == "PATH":
			return fmt.Errorf("element %d names PATH; the daemon's PATH is [daemon] path (an array of directories)", i)
		}
	}
	return nil
}

// parsePathList reads [daemon] path: an array of directories, checked by
// checkPathList.
func parsePathList(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		if s, isString := v.(string); isString {
			return nil, fmt.Errorf("want an array of directories such as %s, got %s", tomlArray(strings.Split(s, ":")), describe(v))
		}
		return nil, fmt.Errorf("want an array of directories, got %s", describe(v))
	}
	dirs := make([]string, len(arr))
	for i, el := range arr {
		s, ok := el.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %s, want a directory", i, describe(el))
		}
		dirs[i] = s
	}
	if len(dirs) == 0 {
		return nil, errors.New("the array is empty; want the directories agent commands are found in (remove the key to use the pinned PATH)")
	}
	return dirs, checkPathList(dirs)
}

// checkPathList refuses a directory list with an entry that is not an
// absolute path or holds a ':' (which PATH cannot carry).
func checkPathList(dirs []string) error {
	for i, d := range dirs {
		if !filepath.IsAbs(d) || strings.ContainsAny(d, ":\x00") {
			return fmt.Errorf("element %d, %s, is not an absolute directory without ':'; a relative entry would be looked up in whatever directory a program runs in", i, quote(d))
		}
	}
	return nil
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
					if err := checkEnvList([]string{ek}, false); err != nil {
						return nil, fmt.Errorf("entry %d: env.%s: %s", i, ek, strings.TrimPrefix(err.Error(), "element 0 "))
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

// parseAgentArgv takes an agent's command: an argv (parseArgv) that
// launches an adapter installed on this machine (dispatch.CheckCommand:
// no launcher that fetches it at run time, no script looked up in a
// task's cwd).
func parseAgentArgv(v any) ([]string, error) {
	argv, err := parseArgv(v)
	if err != nil {
		return nil, err
	}
	return argv, checkAgentArgv(argv)
}

// checkAgentArgv checks an agent's command as parseAgentArgv does.
func checkAgentArgv(argv []string) error {
	if err := checkArgv(argv); err != nil {
		return err
	}
	if why := dispatch.CheckCommand(argv); why != "" {
		return errors.New(why)
	}
	return nil
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

// parseIdleTimeout takes a TOML string holding a Go duration of zero or
// more ("0" means never).
func parseIdleTimeout(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration string such as \"10m\", or \"0\" for never, got %s", describe(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s is not a Go duration such as \"10m\" or \"0\"", quote(s))
	}
	if d < 0 {
		return 0, fmt.Errorf("want a duration of 0 or more, got %s", quote(s))
	}
	return d, nil
}

// parseKeep takes a TOML string holding a retention period: a Go
// duration of zero or more ("0" keeps forever).
func parseKeep(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration string such as \"720h\", or \"0\" to keep forever, got %s", describe(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s is not a Go duration such as \"720h\" or \"0\" (days are written in hours: 30 days is \"720h\")", quote(s))
	}
	if d < 0 {
		return 0, fmt.Errorf("want a duration of 0 or more, got %s", quote(s))
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

// parseDepth reads limits.max_delegation_depth: an integer from 1 to
// MaxDelegationDepth.
func parseDepth(v any) (int, error) {
	n, ok := v.(int64)
	if !ok || n < 1 || n > MaxDelegationDepth {
		return 0, fmt.Errorf("want an integer from 1 to %d, got %s", MaxDelegationDepth, describe(v))
	}
	return int(n), nil
}

// parseShare parses limits.inbox_sender_share: a percentage, 1 to 100.
func parseShare(v any) (int, error) {
	n, ok := v.(int64)
	if !ok || n < 1 || n > 100 {
		return 0, fmt.Errorf("want a percentage from 1 to 100, got %s", describe(v))
	}
	return int(n), nil
}

// checkPerCaller checks limits.max_dispatch_per_caller against
// limits.max_dispatch (zero: the default, always within).
func checkPerCaller(l LimitsConfig) error {
	switch pc := l.MaxDispatchPerCaller; {
	case pc < 0:
		return fmt.Errorf("want a positive integer, got %d", pc)
	case pc > l.MaxDispatch:
		return fmt.Errorf("%d is more than limits.max_dispatch (%d); a caller's share is at most every slot", pc, l.MaxDispatch)
	}
	return nil
}

// parseReserve takes storage.min_free_bytes: 0, or at least
// MinReserveBytes.
func parseReserve(v any) (int64, error) {
	n, err := parseNonNegativeInt(v)
	if err == nil && n > 0 && n < MinReserveBytes {
		err = fmt.Errorf("want 0 (no reserve) or at least %d bytes (16 MiB, the room acknowledging and pruning need), got %d", MinReserveBytes, n)
	}
	return n, err
}

// parseNonNegativeInt takes a TOML integer of zero or more.
func parseNonNegativeInt(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("want an integer of 0 or more, got %s", describe(v))
	}
	if n < 0 {
		return 0, fmt.Errorf("want an integer of 0 or more, got %d", n)
	}
	if int64(int(n)) != n {
		return 0, fmt.Errorf("%d is too large", n)
	}
	return n, nil
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
