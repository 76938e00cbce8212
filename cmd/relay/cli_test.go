package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// relayCLI runs the relay command line in-process on home (nothing runs
// there: no daemon answers) and returns stdout, stderr and the exit code.
func relayCLI(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	vars := map[string]string{"RELAY_HOME": home, "HOME": home}
	e := &cliIO{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), args, e)
	return out.String(), errb.String(), code
}

// The command line behaves as gh and kubectl users expect: help exits 0
// and lists what there is, a group lists its subcommands, a typo gets a
// did-you-mean, and every command's --help shows its flags.
func TestCLIHelpAndSuggestions(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, c := range []struct {
		args     []string
		code     int
		stdout   []string
		stderr   []string
		noStdout bool
	}{
		{args: []string{"--help"}, stdout: []string{"tasks", "agents", "daemon", "mcp-config", "completion"}},
		{args: nil, stdout: []string{"Available Commands", "tasks"}},
		{args: []string{"tasks"}, stdout: []string{"list", "show", "cancel"}},
		{args: []string{"tasks", "--help"}, stdout: []string{"list", "show", "cancel"}},
		{args: []string{"messages"}, stdout: []string{"list"}},
		{args: []string{"agents", "--help"}, stdout: []string{"--json", "probe", "verify"}},
		{args: []string{"tasks", "list", "--help"}, stdout: []string{"Usage: relay tasks list", "--limit", "--state", "--json", "--home"}},
		{args: []string{"tasks", "list", "-h"}, stdout: []string{"Usage: relay tasks list"}},
		{args: []string{"help", "tasks", "show"}, stdout: []string{"Usage: relay tasks show TASK_ID"}},
		{args: []string{"daemon", "--help"}, stdout: []string{"Usage: relay daemon", "--home"}},
		{args: []string{"--version"}, stdout: []string{"relay dev ("}},
		{args: []string{"taks"}, code: 2, noStdout: true, stderr: []string{"invalid_args", `unknown command "relay taks"`, "did you mean `relay tasks`?"}},
		{args: []string{"tasks", "lsit"}, code: 2, noStdout: true, stderr: []string{`unknown command "relay tasks lsit"`, "`relay tasks list`"}},
		{args: []string{"agents", "prob"}, code: 2, noStdout: true, stderr: []string{"did you mean `relay agents probe`?"}},
		{args: []string{"tasks", "list", "--limt", "3"}, code: 2, noStdout: true, stderr: []string{"invalid_args", "unknown flag: --limt", "hint: run `relay tasks list --help`"}},
		{args: []string{"tasks", "list", "--limit", "0"}, code: 2, noStdout: true, stderr: []string{"invalid_args", "--limit 0 is out of range 1..1000"}},
		{args: []string{"messages", "list", "--limit", "1001"}, code: 2, noStdout: true, stderr: []string{"invalid_args", "--limit 1001 is out of range"}},
		{args: []string{"tasks", "show"}, code: 2, noStdout: true, stderr: []string{"invalid_args", "hint: run `relay tasks show --help`"}},
		// --home before the command, as every command takes it.
		{args: []string{"--home", home, "--help"}, stdout: []string{"tasks", "agents"}},
		{args: []string{"--home", home, "tasks", "--help"}, stdout: []string{"list", "show", "cancel"}},
		{args: []string{"--home", home, "taks"}, code: 2, noStdout: true, stderr: []string{`unknown command "relay taks"`}},
		// A flag no group takes is a usage error, not an internal one.
		{args: []string{"--hoem", home}, code: 2, noStdout: true, stderr: []string{"invalid_args", "unknown flag: --hoem", "hint: run `relay --help`"}},
		{args: []string{"tasks", "--bogus"}, code: 2, noStdout: true, stderr: []string{"invalid_args", "unknown flag: --bogus", "hint: run `relay tasks --help`"}},
	} {
		out, errOut, code := relayCLI(t, home, c.args...)
		if code != c.code {
			t.Errorf("relay %q: exit %d, want %d\nstdout %s\nstderr %s", c.args, code, c.code, out, errOut)
		}
		for _, w := range c.stdout {
			if !strings.Contains(out, w) {
				t.Errorf("relay %q: stdout lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, w := range c.stderr {
			if !strings.Contains(errOut, w) {
				t.Errorf("relay %q: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
		if c.noStdout && out != "" {
			t.Errorf("relay %q: stdout %q, want nothing", c.args, out)
		}
	}
}

// With --json, an error is the JSON object {code, message, hint} on stdout
// with the same exit code as without; commands that print no listing or
// object do not offer --json.
func TestCLIJSONErrors(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tasks", "list", "--json"}, 5, "daemon_unavailable"},
		{[]string{"agents", "--json"}, 5, "daemon_unavailable"},
		{[]string{"tasks", "show", "T-1", "--json"}, 5, "daemon_unavailable"},
		{[]string{"tasks", "watch", "T-1", "--json"}, 5, "daemon_unavailable"},
		{[]string{"tasks", "watch", "T-1", "T-2", "--json"}, 2, "invalid_args"},
		{[]string{"tasks", "list", "--json", "--limt", "3"}, 2, "invalid_args"},
		{[]string{"messages", "list", "extra", "--json"}, 2, "invalid_args"},
	} {
		out, errOut, code := relayCLI(t, home, c.args...)
		if code != c.code {
			t.Errorf("relay %q: exit %d, want %d", c.args, code, c.code)
		}
		var got map[string]string
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Errorf("relay %q: stdout is not one JSON object: %v\n%s", c.args, err, out)
			continue
		}
		if got["code"] != c.want || got["message"] == "" || got["hint"] == "" || len(got) != 3 {
			t.Errorf("relay %q: %v, want code %s with a message and a hint", c.args, got, c.want)
		}
		if errOut != "" {
			t.Errorf("relay %q: stderr %q, want nothing beside the JSON error", c.args, errOut)
		}
	}
	for _, args := range [][]string{{"daemon", "--json"}, {"mcp", "--json"}, {"fsm", "dot", "--json"}, {"mcp-config", "--client", "claude", "--json"}} {
		_, errOut, code := relayCLI(t, home, args...)
		if code != 2 || !strings.Contains(errOut, "unknown flag: --json") {
			t.Errorf("relay %q: exit %d, stderr %q; want invalid_args for an unknown --json", args, code, errOut)
		}
	}
}

// Shell completion: the scripts are generated, and the completer offers
// flags, states, clients and (without a daemon) the built-in agents.
func TestCLICompletion(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, _, code := relayCLI(t, home, "completion", sh)
		if code != 0 || !strings.Contains(out, "relay") || len(out) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes", sh, code, len(out))
		}
	}
	for _, c := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"tasks", "list", "--st"}, []string{"--state"}, []string{"--limit"}},
		{[]string{"tasks", "list", "--state", ""}, []string{"submitted", "blocked", "completed"}, nil},
		{[]string{"tasks", "list", "--agent", "co"}, []string{"codex"}, []string{"claude"}},
		{[]string{"agents", "probe", ""}, []string{"claude", "gemini", "opencode"}, nil},
		{[]string{"mcp-config", "--client", ""}, []string{"claude", "codex", "hermes"}, nil},
		{[]string{"ta"}, []string{"tasks"}, []string{"agents"}},
	} {
		out, _, code := relayCLI(t, home, append([]string{"__complete"}, c.args...)...)
		if code != 0 {
			t.Errorf("__complete %q: exit %d", c.args, code)
		}
		words := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			words[strings.SplitN(l, "\t", 2)[0]] = true
		}
		for _, w := range c.want {
			if !words[w] {
				t.Errorf("__complete %q: no %q in\n%s", c.args, w, out)
			}
		}
		for _, w := range c.not {
			if words[w] {
				t.Errorf("__complete %q: %q offered:\n%s", c.args, w, out)
			}
		}
	}
}

// `relay fsm dot --svg` renders through Graphviz when dot is on PATH, and
// says how to install it when not.
func TestCLIFSMDotSVG(t *testing.T) {
	t.Parallel()
	out, errOut, code := relayCLI(t, t.TempDir(), "fsm", "dot", "--svg")
	if code != 0 || !strings.Contains(out, "<svg") || !strings.Contains(out, "guardedClaude") {
		t.Fatalf("fsm dot --svg: exit %d, %d bytes, stderr %s", code, len(out), errOut)
	}
	cmd := exec.Command(relayBin, "fsm", "dot", "--svg")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "Graphviz's dot, which is not on PATH") || !strings.Contains(stderr.String(), "apt-get install graphviz") {
		t.Errorf("fsm dot --svg without dot: %v, stdout %d bytes, stderr %s", err, stdout.Len(), stderr.String())
	}
}

// --home's help names every place the home is looked for, in the order
// resolveHome looks, down to the ~/.local/state/hai-relay fallback.
func TestCLIHomeHelpNamesTheFallback(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, args := range [][]string{{"--help"}, {"tasks", "--help"}, {"tasks", "list", "--help"}, {"daemon", "--help"}} {
		out, _, code := relayCLI(t, home, args...)
		want := "relay home DIR (default $RELAY_HOME, else $XDG_STATE_HOME/hai-relay, else ~/.local/state/hai-relay)"
		if code != 0 || !strings.Contains(out, "--home DIR") || !strings.Contains(out, want) {
			t.Errorf("relay %q: exit %d, --home's help is not %q:\n%s", args, code, want, out)
		}
	}
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"RELAY_HOME": "/r", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "/r"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/hai-relay"},
		{map[string]string{"HOME": "/h"}, "/h/.local/state/hai-relay"},
	} {
		got, err := resolveHome("", func(k string) string { return c.vars[k] })
		if err != nil || got != c.want {
			t.Errorf("resolveHome with %v: %q, %v; want %q", c.vars, got, err, c.want)
		}
	}
}

// A --state that is no task state is a usage error naming the states,
// before any daemon is asked; --help lists them too.
func TestCLITasksListStates(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out, errOut, code := relayCLI(t, home, "tasks", "list", "--state", "bogus")
	if code != 2 || out != "" || !strings.Contains(errOut, `relay: invalid_args: --state "bogus" is not a task state`) {
		t.Errorf("tasks list --state bogus: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	help, _, _ := relayCLI(t, home, "tasks", "list", "--help")
	for _, l := range strings.Split(help, "\n") {
		if strings.Contains(l, "--state STATE") {
			help = l
		}
	}
	jsonOut, _, jsonCode := relayCLI(t, home, "tasks", "list", "--state", "bogus", "--json")
	var jsonErr map[string]string
	if err := json.Unmarshal([]byte(jsonOut), &jsonErr); err != nil || jsonCode != 2 || jsonErr["code"] != "invalid_args" {
		t.Errorf("tasks list --state bogus --json: exit %d, %v: %s", jsonCode, err, jsonOut)
	}
	for _, s := range model.AllStates() {
		if !strings.Contains(errOut, string(s)) || !strings.Contains(jsonErr["hint"], string(s)) {
			t.Errorf("the --state error does not name %s:\n%s", s, errOut)
		}
		if !strings.Contains(help, string(s)) {
			t.Errorf("tasks list --help: the --state line does not name %s:\n%s", s, help)
		}
	}
}

// A missing argument is named, with the command in use: never "1
// argument(s) expected, 0 given".
func TestCLIMissingArguments(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "show"}, "tasks show needs a task id, e.g. relay tasks show T-…"},
		{[]string{"tasks", "cancel"}, "tasks cancel needs a task id, e.g. relay tasks cancel T-…"},
		{[]string{"agents", "probe"}, "agents probe needs an agent name, e.g. relay agents probe claude"},
		{[]string{"agents", "verify"}, "agents verify needs agent names or --all, e.g. relay agents verify claude"},
		{[]string{"agents", "verify", "claude", "--all"}, "agents verify takes agent names or --all, not both"},
	} {
		out, errOut, code := relayCLI(t, home, c.args...)
		hint := "hint: run `relay " + strings.Join(c.args[:2], " ") + " --help`"
		if code != 2 || out != "" || !strings.Contains(errOut, "relay: invalid_args: "+c.want+"\n") || !strings.Contains(errOut, hint) {
			t.Errorf("relay %q: exit %d\nstdout %s\nstderr %s\nwant invalid_args %q and %q", c.args, code, out, errOut, c.want, hint)
		}
	}
	// Every command's check of its positional arguments, run with none.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args != nil {
			if err := c.Args(c, nil); err != nil && (strings.Contains(err.Error(), "argument(s)") || !strings.Contains(err.Error(), " needs ")) {
				t.Errorf("%s without arguments: %v; want what it needs", c.CommandPath(), err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(context.Background(), &cliIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}))
}

// Help entries share one style: every command's summary and every flag's
// help begins in lower case, cobra's own commands (help, completion)
// included.
func TestCLIHelpEntriesLowerCase(t *testing.T) {
	t.Parallel()
	root := newRoot(context.Background(), &cliIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
	capital := func(s string) bool { r, _ := utf8.DecodeRuneInString(s); return unicode.IsUpper(r) }
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		n++
		if capital(c.Short) {
			t.Errorf("%s: summary %q begins with a capital", c.CommandPath(), c.Short)
		}
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && capital(f.Usage) {
					t.Errorf("%s --%s: help %q begins with a capital", c.CommandPath(), f.Name, f.Usage)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < len(commands)+6 { // the groups, help, completion and its shells
		t.Errorf("walked %d commands, want every one of the %d registered and cobra's own", n, len(commands))
	}
}
