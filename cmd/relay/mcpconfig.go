package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "mcp-config", summary: "print the MCP client config snippet for --client NAME (never edits a file)", usage: "--client NAME [--as AGENT] [--home DIR] [--command PATH]", setup: mcpConfigCommand, noJSON: true})
}

// serverName is the key the relay's facade gets in each client's config.
const serverName = "hai-relay"

// clientFormat renders one client's documented MCP config format.
type clientFormat struct {
	where  string // where the client reads it
	render func(command string, args []string) (string, error)
}

var clientFormats = map[string]clientFormat{
	// Claude Code: project-scoped .mcp.json (or `claude mcp add-json`).
	"claude": {where: ".mcp.json at the project root (or: claude mcp add-json " + serverName + " '<the inner object>')",
		render: func(c string, a []string) (string, error) {
			return jsonSnippet(map[string]any{"mcpServers": map[string]any{serverName: map[string]any{
				"type": "stdio", "command": c, "args": a, "env": map[string]string{}}}})
		}},
	// Codex: TOML tables under mcp_servers in ~/.codex/config.toml.
	"codex": {where: "~/.codex/config.toml",
		render: func(c string, a []string) (string, error) {
			return fmt.Sprintf("[mcp_servers.%s]\ncommand = %s\nargs = %s\n", serverName, tomlString(c), tomlArray(a)), nil
		}},
	// Cursor: mcpServers in ~/.cursor/mcp.json (or .cursor/mcp.json in a project).
	"cursor": {where: "~/.cursor/mcp.json (global) or .cursor/mcp.json (project)",
		render: func(c string, a []string) (string, error) {
			return jsonSnippet(map[string]any{"mcpServers": map[string]any{serverName: map[string]any{"command": c, "args": a}}})
		}},
	// Gemini CLI: mcpServers in settings.json.
	"gemini": {where: "~/.gemini/settings.json (global) or .gemini/settings.json (project)",
		render: func(c string, a []string) (string, error) {
			return jsonSnippet(map[string]any{"mcpServers": map[string]any{serverName: map[string]any{"command": c, "args": a}}})
		}},
	// OpenCode: a "local" server under mcp, command as one array.
	"opencode": {where: "opencode.json at the project root or ~/.config/opencode/opencode.json (OpenCode 2 reads this shape too; its native form nests servers under mcp.servers)",
		render: func(c string, a []string) (string, error) {
			return jsonSnippet(map[string]any{"$schema": "https://opencode.ai/config.json", "mcp": map[string]any{serverName: map[string]any{
				"type": "local", "command": append([]string{c}, a...), "enabled": true}}})
		}},
	// Hermes Agent: YAML under mcp_servers in ~/.hermes/config.yaml.
	"hermes": {where: "~/.hermes/config.yaml",
		render: func(c string, a []string) (string, error) {
			quoted := make([]string, len(a))
			for i, x := range a {
				quoted[i] = strconv.Quote(x)
			}
			return fmt.Sprintf("mcp_servers:\n  %s:\n    command: %s\n    args: [%s]\n", serverName, strconv.Quote(c), strings.Join(quoted, ", ")), nil
		}},
}

func clientNames() []string {
	var ns []string
	for n := range clientFormats {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func mcpConfigCommand(f *flags) runFunc {
	client := f.String("client", "", "the MCP client: "+strings.Join(clientNames(), ", "))
	as := f.String("as", "", "the agent identity the facade speaks for (default: the client's own name)")
	cmdPath := f.String("command", "", "the relay binary `PATH` the client should run (default: this binary, or relay from PATH when this one is a temporary build)")
	return func(_ context.Context, e *cliIO) error {
		cf, ok := clientFormats[*client]
		if !ok {
			return model.Errorf(model.CodeInvalidArgs, "unknown --client %q", *client).
				WithHint("one of: " + strings.Join(clientNames(), ", "))
		}
		agent := *as
		if agent == "" {
			agent = *client
		}
		relayArgs := []string{"mcp", "--as", agent}
		if f.home != "" || e.getenv("RELAY_HOME") != "" {
			home, err := resolveHome(f.home, e.getenv)
			if err != nil {
				return err
			}
			relayArgs = append(relayArgs, "--home", home)
		}
		bin := *cmdPath
		if bin == "" {
			exe, err := os.Executable()
			var warning string
			bin, warning = relayBinary(exe, err, e.getenv)
			if warning != "" {
				fmt.Fprintf(e.stderr, "# warning: %s\n", safeText(warning))
			}
		}
		// TOML and YAML strings are Unicode: a path that is not UTF-8 cannot
		// be written into every client's format without changing it.
		for _, s := range append([]string{bin}, relayArgs...) {
			if !utf8.ValidString(s) {
				return model.Errorf(model.CodeInvalidArgs, "%q is not valid UTF-8; MCP client config files cannot hold it", s).
					WithHint("install relay, and choose the relay home, under a path that is valid UTF-8")
			}
		}
		out, err := cf.render(bin, relayArgs)
		if err != nil {
			return err
		}
		fmt.Fprint(e.stdout, out)
		fmt.Fprintf(e.stderr, "# add this to %s; relay never edits client config\n", cf.where)
		return nil
	}
}

// relayBinary picks the relay program an MCP client should run, always
// as an absolute path when there is one (a client's PATH is often not
// the shell's), and a warning for the operator when the choice is not
// obvious:
//   - this binary, when it is installed (not a `go run` build in a temp
//     dir that will vanish), with a warning when a different relay comes
//     first on PATH;
//   - else the relay found on PATH, saying so;
//   - else the bare name, saying that the snippet will not work until a
//     relay is installed.
func relayBinary(exe string, exeErr error, getenv func(string) string) (bin, warning string) {
	onPath := lookPathIn("relay", getenv("PATH"))
	temporary := exeErr != nil || strings.Contains(exe, string(filepath.Separator)+"go-build") ||
		strings.HasPrefix(exe, filepath.Clean(os.TempDir())+string(filepath.Separator))
	switch {
	case !temporary:
		if onPath != "" && !sameFile(onPath, exe) {
			warning = fmt.Sprintf("the snippet runs this relay, %s; `relay` on your PATH is another one, %s", exe, onPath)
		}
		return exe, warning
	case onPath != "":
		return onPath, fmt.Sprintf("this relay is a temporary build; the snippet runs the relay on your PATH, %s", onPath)
	}
	return "relay", "no relay is installed on your PATH and this one is a temporary build: install it (go build -o ~/.local/bin/relay ./cmd/relay) or pass --command PATH"
}

// lookPathIn is exec.LookPath on the PATH given, absolute results only.
func lookPathIn(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

func jsonSnippet(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // paths keep their & < > readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// tomlString is s as a TOML basic string: quotes, backslashes and control
// characters escaped with the escapes TOML 1.0 defines (\uXXXX for the
// ones without a short form; Go's \x escapes are not TOML 1.0). s must be
// valid UTF-8.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlArray(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = tomlString(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
