package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/spf13/cobra"
)

// groupSummaries describe the command groups that do nothing themselves
// but list their subcommands.
var groupSummaries = map[string]string{
	"tasks":    "list, show, watch and cancel delegated tasks",
	"messages": "list the passive messages agents left each other",
	"audit":    "check the hash-chained audit log",
	"fsm":      "the task lifecycle as a graph",
}

// newRoot builds the command tree from the registered commands. Cobra
// owns the tree: `relay --help`, `relay tasks` listing its subcommands,
// did-you-mean on a mistyped command, `relay --version` and shell
// completion. Each leaf parses its own flags (newFlags, where the
// command runs), so cobra passes them through untouched
// (DisableFlagParsing) and asks the command for them when it needs to
// list or complete them (describeFlags).
func newRoot(ctx context.Context, e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "relay",
		Short: "a local relay for coding agents (messages, gated task delegation, audit)",
		Long: "relay: a local relay for coding agents (messages, gated task delegation, audit).\n\n" +
			"Every command takes --home DIR (default $RELAY_HOME, else $XDG_STATE_HOME/hai-relay);\n" +
			"listings and objects take --json. `relay COMMAND --help` shows a command's flags.",
		Version:               versionLine(),
		SilenceErrors:         true,
		SilenceUsage:          true,
		Args:                  cobra.ArbitraryArgs,
		RunE:                  groupRun,
		DisableFlagsInUseLine: true,
		CompletionOptions:     cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetVersionTemplate("relay {{.Version}}\n")
	// Every command takes --home, so a group takes it too (`relay --home
	// DIR --help`, `relay --home DIR tasks`); leaves parse their own.
	root.PersistentFlags().String("home", "", "the relay home (default $RELAY_HOME, else $XDG_STATE_HOME/hai-relay)")
	// A flag a group does not take is a usage error, as a leaf's is.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return model.Errorf(model.CodeInvalidArgs, "%v", err).WithHint(fmt.Sprintf("run `%s --help`", cmd.CommandPath()))
	})
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SuggestionsMinimumDistance = 2

	nodes := map[string]*cobra.Command{"": root}
	var node func(path string) *cobra.Command
	node = func(path string) *cobra.Command {
		if c, ok := nodes[path]; ok {
			return c
		}
		parentPath, word := "", path
		if i := strings.LastIndex(path, " "); i >= 0 {
			parentPath, word = path[:i], path[i+1:]
		}
		c := &cobra.Command{
			Use:                        word,
			Short:                      groupSummaries[path],
			Args:                       cobra.ArbitraryArgs,
			RunE:                       groupRun,
			SuggestionsMinimumDistance: 2,
		}
		node(parentPath).AddCommand(c)
		nodes[path] = c
		return c
	}
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, rc := range cs {
		c := node(rc.name)
		rc := rc
		c.Short = rc.summary
		c.DisableFlagParsing = true
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return complete(ctx, e, rc, args, toComplete)
		}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if cmd.HasSubCommands() {
				// `relay agents prob`: a mistyped subcommand, not an
				// argument of `relay agents`.
				if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
					return unknownCommand(cmd, args[0])
				}
				// `relay agents --help`: its flags and its subcommands.
				if slices.Contains(args, "--help") || slices.Contains(args, "-h") {
					return cmd.Help()
				}
			}
			return rc.run(cmd.Context(), e, args)
		}
		c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
			// `relay help tasks list`: the command's own usage.
			if f := describeFlags(ctx, e, rc); f != nil {
				f.Usage()
			}
			if cmd.HasSubCommands() {
				fmt.Fprintf(e.stdout, "\nSubcommands:\n")
				for _, sub := range cmd.Commands() {
					if sub.IsAvailableCommand() {
						fmt.Fprintf(e.stdout, "  %-10s %s\n", sub.Name(), sub.Short)
					}
				}
			}
		})
	}
	return root
}

// groupRun runs a group without a subcommand (`relay tasks`): it lists
// the subcommands; an unknown word is an unknown command.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return cmd.Help()
}

// unknownCommand is invalid_args naming the closest commands.
func unknownCommand(cmd *cobra.Command, word string) error {
	path := strings.TrimSpace(cmd.CommandPath() + " " + word)
	hint := fmt.Sprintf("run `%s --help` for the list of commands", cmd.CommandPath())
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		for i := range s {
			s[i] = "`" + cmd.CommandPath() + " " + s[i] + "`"
		}
		hint = "did you mean " + strings.Join(s, " or ") + "? " + hint
	}
	return model.Errorf(model.CodeInvalidArgs, "unknown command %q", path).WithHint(hint)
}

// describeFlags returns the flags of command rc without running it.
func describeFlags(ctx context.Context, e *env, rc command) *flags {
	var f *flags
	de := *e
	de.describe = &f
	if err := rc.run(ctx, &de, nil); err != nil && !errors.Is(err, errDescribed) {
		return nil
	}
	return f
}

func versionLine() string {
	v := versionInfo()
	s := v["version"] + " (" + v["go"]
	if r := v["revision"]; r != "" {
		s += ", " + r
	}
	return s + ")"
}
