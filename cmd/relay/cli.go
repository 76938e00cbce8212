package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliIO is what a command may touch of the outside world (its streams and
// its environment variables, through getenv), so end-to-end tests
// can run commands in-process on a temp home.
type cliIO struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// command is one `relay …` command. The tree, help, suggestions and
// completion are cobra's (root.go): when the tree is built, setup declares
// the command's flags on its cobra command and returns what it runs with
// them parsed.
type command struct {
	name    string // e.g. "fsm dot"
	summary string
	// long, when set, is the help's text in place of summary.
	long string
	// usage is the synopsis after the name, e.g. "TASK_ID [--json]".
	usage string
	// args checks the positional arguments; nil takes none.
	args  cobra.PositionalArgs
	setup func(f *flags) runFunc
	// noJSON marks a command that prints no listing or object (the
	// daemon, the MCP server, a DOT graph, a config snippet): it offers
	// no --json.
	noJSON bool
	// wide marks a command that prints a table: it offers --wide, which
	// prints every cell whole instead of cutting it with "…".
	wide bool
}

// runFunc runs a command whose flags and arguments were parsed into the
// flags its setup declared.
type runFunc func(ctx context.Context, e *cliIO) error

var commands []command

func register(c command) { commands = append(commands, c) }

// exitCodes maps error codes to process exit codes: one table, used by
// every command.
var exitCodes = map[model.Code]int{
	model.CodeInvalidArgs:           2,
	model.CodeInvalidConfig:         2,
	model.CodeNotFound:              3,
	model.CodeUnknownAgent:          3,
	model.CodeTaskNotCancelable:     4,
	model.CodeStaleState:            4,
	model.CodeInvalidTransition:     4,
	model.CodeDaemonUnavailable:     5,
	model.CodeDaemonAlreadyRunning:  4, // a conflict, as HTTP 409: the home's daemon already runs
	model.CodeAuditBroken:           6,
	model.CodeOutcomeUnknown:        7,
	model.CodeAgentNotVerified:      8, // relay agents verify: an agent's hardening was not verified
	model.CodePayloadTooLarge:       2,
	model.CodeInvalidCwd:            2,
	model.CodeInvalidRecipient:      2,
	model.CodeBroadcastNotSupported: 2,
	model.CodeStorageFull:           9, // the disk, or the reserve kept free on it, is full: nothing was stored
	model.CodeRecipientInboxFull:    9, // a recipient's inbox quota is full: nothing was stored
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if c, ok := exitCodes[model.ErrorCode(err)]; ok {
		return c
	}
	return 1
}

// run runs the relay command line args and returns the process exit code.
func run(ctx context.Context, args []string, e *cliIO) int {
	// Under --json stdout holds one JSON document: the result, or else
	// the error. A command that printed its result and then failed (a
	// probe's agent entry, then the probe's error) reports the error on
	// stderr.
	out := &countingWriter{w: e.stdout}
	e.stdout = out
	root := newRoot(ctx, e)
	// Never nil: cobra reads os.Args itself when given nil, so an empty
	// command line would be parsed from the process's own arguments.
	root.SetArgs(append([]string{}, args...))
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		// The command that failed offers --json and was asked for it.
		printError(e, err, cmd != nil && cmd.Flags().Lookup("json") != nil && wantsJSON(args))
	}
	return exitCode(err)
}

// countingWriter remembers whether anything was written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func wroteStdout(w io.Writer) bool {
	c, ok := w.(*countingWriter)
	return ok && c.n > 0
}

// cliHints replace the catalogue's default hints that speak MCP (the
// tools, their schemas) with what to run at a shell.
var cliHints = map[model.Code]string{
	model.CodeInvalidArgs:  "run the command with --help to see its arguments",
	model.CodeUnknownAgent: "run `relay agents` to see the known agents",
	model.CodeNotFound:     "run `relay tasks list` or `relay messages list` to see what there is",
}

// printError prints err as the one error shape: code, message, hint. The
// message may quote what a client or an agent sent (a probe's reason, an
// id): it goes through safeText like every stored string. Under --json
// it is the JSON object {"code","message","hint"} on stdout instead
// (spec/errors.md), with the same exit code.
func printError(e *cliIO, err error, asJSON bool) {
	pe := spec.PublicError(err)
	if h, ok := cliHints[pe.Code]; ok && pe.Hint == spec.Hint(pe.Code) {
		pe.Hint = h
	}
	if asJSON && !wroteStdout(e.stdout) {
		_ = printJSON(e.stdout, map[string]string{"code": string(pe.Code), "message": pe.Message, "hint": pe.Hint})
		return
	}
	fmt.Fprintf(e.stderr, "relay: %s: %s\n", safeText(string(pe.Code)), safeText(pe.Message))
	if pe.Hint != "" {
		fmt.Fprintf(e.stderr, "hint: %s\n", safeText(pe.Hint))
	}
}

// flags are a command's flags: its cobra command's, with --home (the
// root's, which every command takes), --json where the command offers it
// and --wide where it prints a table, and the positional arguments.
type flags struct {
	*pflag.FlagSet
	cmd  *cobra.Command
	name string
	home string
	json bool
	wide bool
	// pos are the positional arguments; flags may come before or after
	// them (relay tasks show ID --json).
	pos []string
}

// newTable is a table on w that cuts long cells unless --wide.
func (f *flags) newTable(w io.Writer, header ...string) *table {
	t := newTable(w, header...)
	t.wide = f.wide
	return t
}

// checkLimit refuses a --limit outside 1..model.MaxPageSize, as the MCP
// tools' schemas do (the daemon would read 0 as "the default").
func (f *flags) checkLimit(n int) error {
	if n < 1 || n > model.MaxPageSize {
		return model.Errorf(model.CodeInvalidArgs, "--limit %d is out of range 1..%d", n, model.MaxPageSize).
			WithHint(fmt.Sprintf("pass --limit between 1 and %d; page with --before (run `%s --help`)", model.MaxPageSize, f.cmd.CommandPath()))
	}
	return nil
}

// usageError is invalid_args for a command line the command cannot read,
// with a hint that speaks CLI.
func (f *flags) usageError(format string, args ...any) error {
	return usageError(f.cmd, format, args...)
}

func usageError(cmd *cobra.Command, format string, args ...any) error {
	return model.Errorf(model.CodeInvalidArgs, format, args...).
		WithHint(fmt.Sprintf("run `%s --help`", cmd.CommandPath()))
}

// noArgs is a command's positional arguments when it takes none.
func noArgs(cmd *cobra.Command, args []string) error { return maxArgs(0)(cmd, args) }

// maxArgs takes at most n positional arguments.
func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usageError(cmd, "unexpected argument %q", args[n])
		}
		return nil
	}
}

// oneArg takes exactly one positional argument, what (e.g. "a task
// id"); without it, the error says what is missing and shows it in use
// with example (e.g. "T-…").
func oneArg(what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
			return usageError(cmd, "%s needs %s, e.g. %s %s", name, what, cmd.CommandPath(), example)
		}
		return maxArgs(1)(cmd, args)
	}
}

// wantsJSON reports whether args ask for --json (before a "--").
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

// morePages tells a human how to get the next page of a full listing.
func morePages(e *cliIO, got, limit int, lastID, command string) {
	if got == limit && got > 0 {
		fmt.Fprintf(e.stderr, "more: relay %s --before %s\n", command, safeText(lastID))
	}
}

// homeDefault is where resolveHome looks without --home, as help says it.
const homeDefault = "$RELAY_HOME, else $XDG_STATE_HOME/hai-relay, else ~/.local/state/hai-relay"

// resolveHome picks the relay home: --home, else RELAY_HOME, else
// $XDG_STATE_HOME/hai-relay, else ~/.local/state/hai-relay (~ is $HOME,
// else the user's home directory).
func resolveHome(flagHome string, getenv func(string) string) (string, error) {
	h := flagHome
	if h == "" {
		h = getenv("RELAY_HOME")
	}
	if h == "" {
		if x := getenv("XDG_STATE_HOME"); x != "" {
			h = filepath.Join(x, "hai-relay")
		}
	}
	if h == "" {
		home := getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", model.Errorf(model.CodeInvalidArgs, "cannot find a home directory for the relay").
					WithHint("pass --home DIR or set RELAY_HOME")
			}
		}
		h = filepath.Join(home, ".local", "state", "hai-relay")
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return "", model.Errorf(model.CodeInvalidArgs, "relay home %q: %v", h, err)
	}
	return abs, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
