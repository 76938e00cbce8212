package main

import (
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/model"
)

// The environment of a daemon is deliberate: its agents and the authority
// adapter start from it, and one daemon serves every agent of every
// project until it exits. What it takes depends on who started it.
//
// By hand (relay daemon, a service unit): the environment it was started
// with — the user's own choice, API keys, proxies, XDG directories and
// all — without the code-loading variables (model.CodeLoadingVar), with
// the daemon's PATH (daemonPath), plus [daemon] env.
//
// By a facade (relay mcp's autostart): the facade's environment comes from
// its MCP client's config, which can be a project's checked-in .mcp.json
// with an env block. So the daemon takes from it only autostartTaken (the
// locale and the time zone), and the names [daemon] env lists; it sets
// HOME, USER and LOGNAME from the account (the user database, not the
// facade), XDG_RUNTIME_DIR when /run/user/UID is the user's, its PATH, and
// [daemon] env's NAME=value entries. It runs in its home, not in the
// facade's directory. A variable an agent needs beyond that (an API key,
// a proxy) goes in [daemon] env: as NAME=value, or as NAME, taken from the
// facade, when the user accepts that any project's MCP config may set it.

// autostartTaken are the variables a daemon a facade started takes from
// the facade's environment, beside the names [daemon] env lists: only
// what tells how to show text and time.
var autostartTaken = []string{
	"LANG", "LANGUAGE", "LC_ALL", "LC_ADDRESS", "LC_COLLATE", "LC_CTYPE", "LC_IDENTIFICATION", "LC_MEASUREMENT",
	"LC_MESSAGES", "LC_MONETARY", "LC_NAME", "LC_NUMERIC", "LC_PAPER", "LC_TELEPHONE", "LC_TIME", "TZ",
}

// autostartEnviron returns the entries of environ (a facade's
// environment) that a daemon it starts takes: autostartTaken, the names
// [daemon] env lists, and in a test build its switches
// (testAutostartTaken). A code-loading variable is never among them.
func autostartEnviron(environ []string, d config.DaemonConfig) []string {
	_, take := d.Environ()
	out := []string{} // never nil: a nil exec.Cmd.Env is the whole environment
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if (slices.Contains(autostartTaken, name) || slices.Contains(take, name) || slices.Contains(testAutostartTaken, name)) &&
			!model.CodeLoadingVar(name) {
			out = append(out, kv)
		}
	}
	return out
}

// daemonEnviron is the environment a daemon runs with.
type daemonEnviron struct {
	env     []string // "NAME=value", sorted by name
	removed []string // the code-loading variables it was started with
	// notes are what the log says about it (a HOME it could not set).
	notes []string
}

// names returns the names of env, sorted.
func (de daemonEnviron) names() []string {
	out := make([]string, len(de.env))
	for i, kv := range de.env {
		out[i], _, _ = strings.Cut(kv, "=")
	}
	return out
}

// buildDaemonEnviron builds the environment of a daemon started with own
// (its process environment), autostarted or not, as the comment at the
// top of this file says.
func buildDaemonEnviron(own []string, autostarted bool, d config.DaemonConfig, path daemonPath) daemonEnviron {
	var de daemonEnviron
	base := own
	if autostarted {
		base = autostartEnviron(own, d)
	}
	m := map[string]string{}
	for _, kv := range base {
		if name, value, ok := strings.Cut(kv, "="); ok {
			m[name] = value
		}
	}
	for _, kv := range own {
		if name, _, _ := strings.Cut(kv, "="); model.CodeLoadingVar(name) && !slices.Contains(de.removed, name) {
			de.removed = append(de.removed, name)
		}
	}
	set, take := d.Environ()
	if autostarted {
		for k, v := range accountEnv() {
			if !slices.Contains(take, k) { // else [daemon] env takes it from the facade
				m[k] = v
			}
		}
	}
	for _, kv := range set {
		name, value, _ := strings.Cut(kv, "=")
		m[name] = value
	}
	if _, ok := m["HOME"]; !ok && autostarted {
		de.notes = append(de.notes, fmt.Sprintf("no home directory for uid %d in the user database: HOME is not set (set HOME=/path in [daemon] env)", os.Getuid()))
	}
	m["PATH"] = path.String()
	for k := range m {
		if model.CodeLoadingVar(k) {
			delete(m, k) // config refuses them; kept out here too
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		de.env = append(de.env, k+"="+m[k])
	}
	return de
}

// accountEnv returns HOME, USER and LOGNAME from the user database for the
// current uid, and XDG_RUNTIME_DIR when /run/user/UID is a directory of
// the user's that only the user can use (as systemd-logind makes it).
// A value that cannot be found is left out.
func accountEnv() map[string]string {
	m := map[string]string{}
	uid := os.Getuid()
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if u.HomeDir != "" {
			m["HOME"] = u.HomeDir
		}
		if u.Username != "" {
			m["USER"], m["LOGNAME"] = u.Username, u.Username
		}
	}
	rd := "/run/user/" + strconv.Itoa(uid)
	var st unix.Stat_t
	if unix.Lstat(rd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == uid && st.Mode&0o077 == 0 {
		m["XDG_RUNTIME_DIR"] = rd
	}
	return m
}

// apply makes de the process's environment.
func (de daemonEnviron) apply() error {
	os.Clearenv()
	for _, kv := range de.env {
		name, value, _ := strings.Cut(kv, "=")
		if err := os.Setenv(name, value); err != nil {
			return fmt.Errorf("set %s in the daemon's environment: %w", name, err)
		}
	}
	return nil
}

// environment finds the daemon's PATH, builds its environment and, when
// the daemon is this process, makes them the process's and moves it to
// its home; it logs who started the daemon, what it took and what it
// skipped.
func (d *daemon) environment(cfg config.DaemonConfig) (daemonPath, error) {
	shellPath := os.Getenv("PATH")
	path, err := resolveDaemonPath(d.home, cfg, !d.autostarted, d.repin, shellPath)
	if err != nil {
		return path, err
	}
	d.env = buildDaemonEnviron(os.Environ(), d.autostarted, cfg, path)
	if d.ownProcess {
		if err := d.env.apply(); err != nil {
			return path, err
		}
		if err := os.Chdir(d.home); err != nil {
			return path, fmt.Errorf("cannot work in the relay home %s: %w", d.home, err)
		}
	}
	by := d.startedBy
	d.log.Info("started by", "by", by.By, "agent", by.Agent, "pid", by.PID, "cwd", by.Cwd)
	d.log.Info("environment: names only, values never logged", "env", strings.Join(d.env.names(), ","),
		"path", path.String(), "path_source", path.source, "path_pinned", path.pinned)
	if d.autostarted {
		d.log.Info("started by a facade: took only the locale, the time zone and [daemon] env from its environment, HOME, USER and LOGNAME from the account")
	}
	if len(d.env.removed) > 0 {
		d.log.Warn("removed code-loading variables from the daemon's environment: nothing it starts gets them",
			"removed", strings.Join(d.env.removed, ","))
	}
	for _, n := range d.env.notes {
		d.log.Warn(n)
	}
	switch {
	case path.pin:
		// savePath says it once it is written.
	case path.source == pathFromDefault:
		d.log.Warn("no PATH is pinned for this home: agent commands resolve through the system's directories only; "+
			"start the daemon once by hand (`relay daemon`), which pins your shell's PATH, or set [daemon] path in config.toml",
			"path", path.pinned)
	case !d.autostarted && path.source == pathFromPinned && shellPath != "" && shellPath != path.pinned:
		d.log.Info("agent commands resolve through the PATH pinned in the home, not this shell's (`relay daemon --pin-path` pins this one)",
			"pinned", path.pinned, "file", filepath.Join(d.home, pinnedPathFile))
	}
	for _, sk := range path.skipped {
		d.log.Warn("PATH entry skipped: no agent command is resolved through it", "entry", sk.Entry, "reason", sk.Reason)
	}
	return path, nil
}

// logResolved logs, for each bare program of cfg (before
// ResolveCommands), what the daemon's PATH passed over (daemonPath.notes)
// and, when it was not found, that too.
func (d *daemon) logResolved(cfg config.Config, path daemonPath) {
	check := func(what string, argv []string) {
		if len(argv) == 0 || strings.ContainsRune(argv[0], '/') {
			return
		}
		for _, n := range path.notes(argv[0]) {
			d.log.Warn("skipped a program on the PATH", "for", what, "note", n)
		}
	}
	check("authority", cfg.Authority.Command)
	for _, name := range cfg.AgentNames() {
		a, _ := cfg.Agent(name)
		check("agent "+name, a.Command)
		for _, m := range a.MCPServers {
			check("agent "+name+" mcp server "+m.Name, m.Command)
		}
	}
}

// nonNilSlice returns s, or an empty slice for nil (JSON [] rather than
// null).
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// savePath writes the PATH this start pins, once the daemon has started
// (daemonPath.save), and says so.
func (d *daemon) savePath(path daemonPath) error {
	if !path.pin {
		return nil
	}
	if err := path.save(d.home); err != nil {
		return err
	}
	d.log.Info("pinned this shell's PATH: agent commands resolve through it from now on, whoever starts the daemon "+
		"(`relay daemon --pin-path` replaces it, [daemon] path in config.toml overrides it)",
		"path", path.pinned, "file", filepath.Join(d.home, pinnedPathFile))
	return nil
}
