package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// mcpConfig runs `relay mcp-config ARGS` in-process with the given
// environment and returns stdout, stderr and the exit code. The tests that
// use it do not run in parallel with each other: run sorts the command
// table in place.
func mcpConfig(t *testing.T, vars map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &cliIO{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), append([]string{"mcp-config"}, args...), e)
	return out.String(), errb.String(), code
}

// decodeJSONSnippet decodes a JSON snippet strictly: one object, nothing
// after it.
func decodeJSONSnippet(t *testing.T, client, out string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: snippet is not JSON: %v\n%s", client, err, out)
	}
	if dec.More() {
		t.Fatalf("%s: text after the JSON object:\n%s", client, out)
	}
	return v
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func strs(t *testing.T, what string, v any) []string {
	t.Helper()
	xs, ok := v.([]any)
	if !ok {
		t.Fatalf("%s is %T (%v), want an array of strings", what, v, v)
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		s, ok := x.(string)
		if !ok {
			t.Fatalf("%s[%d] is %T, want a string", what, i, x)
		}
		out[i] = s
	}
	return out
}

// object returns m[k] as an object whose keys are exactly want.
func object(t *testing.T, what string, m map[string]any, k string, want ...string) map[string]any {
	t.Helper()
	o, ok := m[k].(map[string]any)
	if !ok {
		t.Fatalf("%s.%s is %T, want an object (keys %v)", what, k, m[k], keys(m))
	}
	sort.Strings(want)
	if got := keys(o); !slices.Equal(got, want) {
		t.Fatalf("%s.%s has keys %v, want %v", what, k, got, want)
	}
	return o
}

// snippetServer extracts the hai-relay server's command and args from a
// client's snippet, checking the shape of that client's documented format.
func snippetServer(t *testing.T, client, out string) (command string, args []string) {
	t.Helper()
	switch client {
	case "claude":
		// Claude Code's project-scoped .mcp.json (also the shape of
		// `claude mcp add-json`'s argument, one level down).
		v := decodeJSONSnippet(t, client, out)
		servers := object(t, client, map[string]any{"root": v}, "root", "mcpServers")
		srv := object(t, client, object(t, client, servers, "mcpServers", serverName), serverName, "type", "command", "args", "env")
		if srv["type"] != "stdio" {
			t.Fatalf("claude: type %v, want stdio", srv["type"])
		}
		if env, ok := srv["env"].(map[string]any); !ok || len(env) != 0 {
			t.Fatalf("claude: env %v, want an empty object", srv["env"])
		}
		command, _ = srv["command"].(string)
		return command, strs(t, "claude args", srv["args"])
	case "cursor", "gemini":
		// Cursor's mcp.json and Gemini CLI's settings.json: mcpServers,
		// each a command string and an args array.
		v := decodeJSONSnippet(t, client, out)
		servers := object(t, client, map[string]any{"root": v}, "root", "mcpServers")
		srv := object(t, client, object(t, client, servers, "mcpServers", serverName), serverName, "command", "args")
		command, _ = srv["command"].(string)
		return command, strs(t, client+" args", srv["args"])
	case "opencode":
		// OpenCode's opencode.json: servers under "mcp", type "local",
		// the command and its arguments as one array, no "args" key
		// (its schema refuses additional properties).
		v := decodeJSONSnippet(t, client, out)
		if got := keys(v); !slices.Equal(got, []string{"$schema", "mcp"}) {
			t.Fatalf("opencode: top-level keys %v", got)
		}
		if v["$schema"] != "https://opencode.ai/config.json" {
			t.Fatalf("opencode: $schema %v", v["$schema"])
		}
		srv := object(t, client, object(t, client, v, "mcp", serverName), serverName, "type", "command", "enabled")
		if srv["type"] != "local" || srv["enabled"] != true {
			t.Fatalf("opencode: type %v enabled %v, want local true", srv["type"], srv["enabled"])
		}
		argv := strs(t, "opencode command", srv["command"])
		if len(argv) == 0 {
			t.Fatal("opencode: empty command array")
		}
		return argv[0], argv[1:]
	case "codex":
		// Codex's ~/.codex/config.toml: a [mcp_servers.NAME] table.
		var v struct {
			MCPServers map[string]struct {
				Command string   `toml:"command"`
				Args    []string `toml:"args"`
			} `toml:"mcp_servers"`
		}
		md, err := toml.Decode(out, &v)
		if err != nil {
			t.Fatalf("codex: snippet is not TOML: %v\n%s", err, out)
		}
		if u := md.Undecoded(); len(u) != 0 {
			t.Fatalf("codex: unexpected TOML keys %v\n%s", u, out)
		}
		if len(v.MCPServers) != 1 {
			t.Fatalf("codex: %d servers, want only %s", len(v.MCPServers), serverName)
		}
		srv, ok := v.MCPServers[serverName]
		if !ok || !md.IsDefined("mcp_servers", serverName, "command") || !md.IsDefined("mcp_servers", serverName, "args") {
			t.Fatalf("codex: no mcp_servers.%s.command/args\n%s", serverName, out)
		}
		return srv.Command, srv.Args
	case "hermes":
		// Hermes Agent's ~/.hermes/config.yaml. No YAML library in
		// go.mod: the snippet is exactly four lines, the strings in YAML
		// double-quoted form (for the characters these tests use, YAML's
		// escapes and Go's coincide, so strconv.Unquote reads them).
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 4 || lines[0] != "mcp_servers:" || lines[1] != "  "+serverName+":" ||
			!strings.HasPrefix(lines[2], "    command: \"") || !strings.HasPrefix(lines[3], "    args: [") || !strings.HasSuffix(lines[3], "]") {
			t.Fatalf("hermes: snippet is not the expected YAML:\n%s", out)
		}
		if strings.Contains(out, "\t") {
			t.Fatalf("hermes: YAML indentation must not use tabs:\n%s", out)
		}
		c, err := strconv.Unquote(strings.TrimPrefix(lines[2], "    command: "))
		if err != nil {
			t.Fatalf("hermes: command %q: %v", lines[2], err)
		}
		// The flow sequence is JSON-compatible for these strings.
		var a []string
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[3], "    args: ")), &a); err != nil {
			t.Fatalf("hermes: args %q: %v", lines[3], err)
		}
		return c, a
	}
	t.Fatalf("no format check for client %q", client)
	return "", nil
}

// where each client reads its snippet, as printed on stderr.
var snippetWhere = map[string]string{
	"claude":   ".mcp.json",
	"codex":    "~/.codex/config.toml",
	"cursor":   "~/.cursor/mcp.json",
	"gemini":   "~/.gemini/settings.json",
	"opencode": "opencode.json",
	"hermes":   "~/.hermes/config.yaml",
}

func TestMCPConfigEveryClient(t *testing.T) {
	if got := clientNames(); !slices.Equal(got, []string{"claude", "codex", "cursor", "gemini", "hermes", "opencode"}) {
		t.Fatalf("clients %v: a new client needs its format check here", got)
	}
	home := filepath.Join(t.TempDir(), "relay home")
	const bin = "/opt/hai relay/bin/relay"
	for _, c := range clientNames() {
		out, errOut, code := mcpConfig(t, nil, "--client", c, "--command", bin, "--home", home)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", c, code, errOut)
		}
		cmd, args := snippetServer(t, c, out)
		if cmd != bin {
			t.Errorf("%s: command %q, want %q", c, cmd, bin)
		}
		if want := []string{"mcp", "--as", c, "--home", home}; !slices.Equal(args, want) {
			t.Errorf("%s: args %q, want %q", c, args, want)
		}
		if !strings.Contains(errOut, snippetWhere[c]) || !strings.Contains(errOut, "never edits") {
			t.Errorf("%s: stderr does not say where the snippet goes: %q", c, errOut)
		}
		// Without a home anywhere, no --home: the client's relay uses the
		// default home.
		out, _, code = mcpConfig(t, nil, "--client", c, "--command", bin)
		if _, args := snippetServer(t, c, out); code != 0 || !slices.Equal(args, []string{"mcp", "--as", c}) {
			t.Errorf("%s without a home: exit %d, args %q", c, code, args)
		}
	}
}

func TestMCPConfigOptions(t *testing.T) {
	const bin = "/usr/local/bin/relay"
	// --as: the facade speaks for another identity than the client's name.
	out, _, code := mcpConfig(t, nil, "--client", "codex", "--as", "reviewer", "--command", bin)
	if _, args := snippetServer(t, "codex", out); code != 0 || !slices.Equal(args, []string{"mcp", "--as", "reviewer"}) {
		t.Errorf("--as reviewer: exit %d, args %q", code, args)
	}
	// RELAY_HOME is written out, so the client's relay finds the same home.
	out, _, code = mcpConfig(t, map[string]string{"RELAY_HOME": "/srv/relay"}, "--client", "claude", "--command", bin)
	if _, args := snippetServer(t, "claude", out); code != 0 || !slices.Equal(args, []string{"mcp", "--as", "claude", "--home", "/srv/relay"}) {
		t.Errorf("RELAY_HOME: exit %d, args %q", code, args)
	}
	// A relative --home is made absolute: the client starts the relay in
	// a directory of its own choosing.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, _, code = mcpConfig(t, nil, "--client", "gemini", "--command", bin, "--home", "rel/home")
	if _, args := snippetServer(t, "gemini", out); code != 0 || !slices.Equal(args, []string{"mcp", "--as", "gemini", "--home", filepath.Join(wd, "rel", "home")}) {
		t.Errorf("relative --home: exit %d, args %q", code, args)
	}
	// Paths with quotes, backslashes, a tab, a control character (TOML has
	// no \x escape) and non-ASCII letters survive every format (TOML and
	// JSON are decoded by real parsers).
	odd := "/tmp/we\"ird\\dir\twith é\x01/relay"
	for _, c := range clientNames() {
		out, errOut, code := mcpConfig(t, nil, "--client", c, "--command", odd, "--home", "/srv/h&<x>")
		if code != 0 {
			t.Fatalf("%s with an odd path: exit %d\n%s", c, code, errOut)
		}
		cmd, args := snippetServer(t, c, out)
		if cmd != odd || args[len(args)-1] != "/srv/h&<x>" {
			t.Errorf("%s: command %q args %q after a round trip", c, cmd, args)
		}
	}
}

func TestMCPConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // in stderr
	}{
		{[]string{"--client", "vscode"}, []string{"invalid_args", `unknown --client "vscode"`, "hint: one of: claude, codex, cursor, gemini, hermes, opencode"}},
		{nil, []string{"invalid_args", `unknown --client ""`, "hint: one of: claude, codex"}},
		{[]string{"--client", "claude", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"--client", "claude", "--command", "/tmp/\xff/relay"}, []string{"invalid_args", "not valid UTF-8", "hint:"}},
	} {
		out, errOut, code := mcpConfig(t, nil, c.args...)
		if code != 2 || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want exit 2 and nothing on stdout", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
}

// The snippets work: an MCP client that runs exactly the command and args
// of the claude (JSON) and codex (TOML) snippets reaches the relay, as
// that agent, with the eight tools.
func TestMCPConfigSnippetsLaunchTheFacade(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemon(t, home)
	for _, c := range []string{"claude", "codex"} {
		cmd := exec.Command(relayBin, "mcp-config", "--client", c, "--home", home, "--command", relayBin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, errb.String())
		}
		command, args := snippetServer(t, c, out.String())
		mc, err := client.NewStdioMCPClient(command, os.Environ(), args...)
		if err != nil {
			t.Fatalf("%s: start %s %q: %v", c, command, args, err)
		}
		t.Cleanup(func() { mc.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var ir mcp.InitializeRequest
		ir.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		ir.Params.ClientInfo = mcp.Implementation{Name: "snippet-" + c, Version: "0"}
		if _, err := mc.Initialize(ctx, ir); err != nil {
			cancel()
			t.Fatalf("%s: initialize: %v", c, err)
		}
		tools, err := mc.ListTools(ctx, mcp.ListToolsRequest{})
		cancel()
		if err != nil {
			t.Fatalf("%s: tools/list: %v", c, err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		sort.Strings(names)
		want := []string{"ack_messages", "cancel_task", "check_inbox", "get_task", "list_agents", "list_tasks", "send_message", "submit_task"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("%s: tools %v", c, names)
		}
		// The identity is the one in the snippet: a message to itself is
		// refused as such.
		r := callTool(t, mc, "send_message", map[string]any{"to": c, "body": "hi"})
		if !r.isError || r.code() != "invalid_recipient" {
			t.Errorf("%s: send_message to itself: %v %s", c, r.isError, r.text)
		}
	}
	// The binary's default command from a relay under the temp dir (like
	// this test build, or `go run`): the relay on PATH, by its absolute
	// path, and a warning saying so; with none on PATH, the plain name and
	// a warning that the snippet needs a relay installed.
	installed := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(installed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(installed, "relay"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want, warning string }{
		{installed + ":/usr/bin", filepath.Join(installed, "relay"), "this relay is a temporary build; the snippet runs the relay on your PATH"},
		{"/nonexistent", "relay", "no relay is installed on your PATH"},
	} {
		cmd := exec.Command(relayBin, "mcp-config", "--client", "cursor")
		cmd.Env = append(os.Environ(), "RELAY_HOME=", "PATH="+c.path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if command, _ := snippetServer(t, "cursor", string(out)); command != c.want {
			t.Errorf("PATH=%s: default command from a temp build: %q, want %q", c.path, command, c.want)
		}
		if !strings.Contains(stderr.String(), "# warning: "+c.warning) {
			t.Errorf("PATH=%s: stderr lacks the warning %q:\n%s", c.path, c.warning, stderr.String())
		}
	}
}

// An installed relay names itself, and warns when another relay comes
// first on PATH (the client would otherwise run a different version).
func TestMCPConfigRelayBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// relayBinary treats the temp dir as temporary builds: stand for an
	// installed binary with a path outside it that exists (this test's
	// own go tool is one).
	exe, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "relay")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := func(path string) func(string) string {
		return func(k string) string {
			if k == "PATH" {
				return path
			}
			return ""
		}
	}
	bin, warning := relayBinary(exe, nil, env(dir))
	if bin != exe || !strings.Contains(warning, "is another one, "+other) {
		t.Errorf("installed with another relay on PATH: %q, %q", bin, warning)
	}
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, other); err != nil {
		t.Fatal(err)
	}
	if bin, warning := relayBinary(exe, nil, env(dir)); bin != exe || warning != "" {
		t.Errorf("installed and first on PATH: %q, %q; want no warning", bin, warning)
	}
}
