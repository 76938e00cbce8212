package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hai-relay/relay/model"
)

// env is what a command may touch of the outside world, so end-to-end tests
// can run commands in-process on a temp home.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// command is one `relay …` command: it parses its flags, then runs.
type command struct {
	name    string // e.g. "fsm dot"
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands []command

func register(c command) { commands = append(commands, c) }

// errUsage marks a usage error already explained on stderr.
var errUsage = errors.New("usage")

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
	model.CodeAuditBroken:           6,
	model.CodeOutcomeUnknown:        7,
	model.CodeAgentNotVerified:      8, // relay agents verify: an agent's hardening was not verified
	model.CodePayloadTooLarge:       2,
	model.CodeInvalidCwd:            2,
	model.CodeInvalidRecipient:      2,
	model.CodeBroadcastNotSupported: 2,
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if c, ok := exitCodes[model.ErrorCode(err)]; ok {
		return c
	}
	return 1
}

func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stdout)
		return 0
	}
	// Longest match: "fsm dot" before "fsm".
	sort.SliceStable(commands, func(i, j int) bool { return len(commands[i].name) > len(commands[j].name) })
	for _, c := range commands {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			err := c.run(ctx, e, args[len(words):])
			if err != nil && !errors.Is(err, errUsage) && !errors.Is(err, flag.ErrHelp) {
				printError(e, err)
			}
			return exitCode(err)
		}
	}
	fmt.Fprintf(e.stderr, "relay: unknown command %q\nhint: run `relay help` for the list of commands\n", strings.Join(args, " "))
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "relay: a local relay for coding agents (messages, gated task delegation, audit)")
	fmt.Fprintln(w, "\nUsage: relay COMMAND [flags]   (every command takes --home DIR; listings take --json)")
	fmt.Fprintln(w, "\nCommands:")
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-22s %s\n", c.name, c.summary)
	}
}

// printError prints err as the one error shape: code, message, hint. The
// message may quote what a client or an agent sent (a probe's reason, an
// id): it goes through safeText like every stored string.
func printError(e *env, err error) {
	pe := model.Public(err)
	fmt.Fprintf(e.stderr, "relay: %s: %s\n", safeText(string(pe.Code)), safeText(pe.Message))
	if pe.Hint != "" {
		fmt.Fprintf(e.stderr, "hint: %s\n", safeText(pe.Hint))
	}
}

// flags is the flag set every command starts from: --home and --json.
type flags struct {
	*flag.FlagSet
	home string
	json bool
	// pos are the positional arguments; flags may come before or after
	// them (relay tasks show ID --json).
	pos []string
}

func newFlags(e *env, name, args string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet("relay "+name, flag.ContinueOnError)}
	f.SetOutput(e.stderr)
	f.StringVar(&f.home, "home", "", "relay home `DIR` (default $RELAY_HOME, else $XDG_STATE_HOME/hai-relay)")
	f.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	f.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: relay %s %s\n", name, args)
		f.PrintDefaults()
	}
	return f
}

// parse parses args, flags and positional arguments in any order, refusing
// stray positional arguments beyond max.
func (f *flags) parse(args []string, max int) error {
	for {
		if err := f.Parse(args); err != nil {
			return errUsage
		}
		rest := f.Args()
		if len(rest) == 0 {
			break
		}
		f.pos = append(f.pos, rest[0])
		args = rest[1:]
	}
	if len(f.pos) > max {
		fmt.Fprintf(f.Output(), "relay: unexpected argument %q\n", f.pos[max])
		f.Usage()
		return errUsage
	}
	return nil
}

// parseN parses args and requires exactly n positional arguments.
func (f *flags) parseN(args []string, n int) error {
	if err := f.parse(args, n); err != nil {
		return err
	}
	if len(f.pos) != n {
		f.Usage()
		return errUsage
	}
	return nil
}

// morePages tells a human how to get the next page of a full listing.
func morePages(e *env, got, limit int, lastID, command string) {
	if got == limit && got > 0 {
		fmt.Fprintf(e.stderr, "more: relay %s --before %s\n", command, safeText(lastID))
	}
}

// resolveHome picks the relay home: --home, else RELAY_HOME, else
// $XDG_STATE_HOME/hai-relay, else ~/.local/state/hai-relay.
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
