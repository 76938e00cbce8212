package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
// owns the tree and the command line: `relay --help`, `relay tasks`
// listing its subcommands, did-you-mean on a mistyped command, `relay
// --version`, each command's flags (declared on it by addCommand) and
// shell completion.
func newRoot(ctx context.Context, e *cliIO) *cobra.Command {
	root := &cobra.Command{
		Use:   "relay",
		Short: "a local relay for coding agents (messages, gated task delegation, audit)",
		Long: "relay: a local relay for coding agents (messages, gated task delegation, audit).\n\n" +
			"Every command takes --home DIR (default " + homeDefault + ");\n" +
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
	// Every command takes --home, so it is the root's, for all of them
	// (`relay --home DIR tasks`, `relay tasks list --home DIR`).
	root.PersistentFlags().String("home", "", "relay home `DIR` (default "+homeDefault+")")
	_ = root.MarkPersistentFlagDirname("home")
	root.SetFlagErrorFunc(flagError)
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
		addCommand(ctx, e, node(rc.name), rc)
	}
	// Cobra's own commands begin their summaries with a capital; every
	// other entry begins in lower case, as the flags' help does.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			lowerSummaries(c)
		}
	}
	return root
}

// lowerSummaries starts the summaries of c and its subcommands in lower
// case.
func lowerSummaries(c *cobra.Command) {
	if r, n := utf8.DecodeRuneInString(c.Short); n > 0 {
		c.Short = string(unicode.ToLower(r)) + c.Short[n:]
	}
	for _, sub := range c.Commands() {
		lowerSummaries(sub)
	}
}

// addCommand makes c the registered command rc: its synopsis, its flags
// (--json and --wide where it offers them, then its own), the check of
// its positional arguments, its completion and its help.
func addCommand(ctx context.Context, e *cliIO, c *cobra.Command, rc command) {
	c.Use = strings.TrimSpace(c.Name() + " " + rc.usage)
	c.Short, c.Long = rc.summary, rc.long
	c.DisableFlagsInUseLine = true
	// Declared here so that cobra adds none of its own: help is not one
	// of the flags a command's help lists.
	c.Flags().BoolP("help", "h", false, "show this help")
	_ = c.Flags().MarkHidden("help")
	f := &flags{FlagSet: c.Flags(), cmd: c, name: rc.name}
	if !rc.noJSON {
		f.BoolVar(&f.json, "json", false, "print JSON instead of a table (errors too: {code, message, hint} on stdout)")
	}
	if rc.wide {
		f.BoolVar(&f.wide, "wide", false, "print every table cell whole (default: cut long cells with …)")
	}
	run := rc.setup(f)
	args := rc.args
	if args == nil {
		args = noArgs
	}
	c.Args = func(cmd *cobra.Command, pos []string) error {
		// `relay agents prob`: a mistyped subcommand, not an argument
		// of `relay agents`.
		if cmd.HasSubCommands() && len(pos) > 0 {
			return unknownCommand(cmd, pos[0])
		}
		return args(cmd, pos)
	}
	c.RunE = func(cmd *cobra.Command, pos []string) error {
		f.home, _ = cmd.Flags().GetString("home")
		f.pos = pos
		return run(cmd.Context(), e)
	}
	completeCommand(ctx, e, c, rc)
	c.SetHelpFunc(commandHelp)
}

// commandHelp is a registered command's help (`relay tasks list
// --help`, `relay help tasks list`): its synopsis, what it does, its
// flags and its subcommands.
func commandHelp(cmd *cobra.Command, _ []string) {
	w := cmd.OutOrStdout()
	about := cmd.Long
	if about == "" {
		about = cmd.Short
	}
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	fs.AddFlagSet(cmd.LocalFlags())
	fs.AddFlagSet(cmd.InheritedFlags())
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n%s", cmd.UseLine(), about, fs.FlagUsages())
	if cmd.HasSubCommands() {
		fmt.Fprintf(w, "\nSubcommands:\n")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-10s %s\n", sub.Name(), sub.Short)
			}
		}
	}
}

// flagError is invalid_args for a flag a command does not take or a
// value it cannot read. A --help before it still shows the help.
func flagError(cmd *cobra.Command, err error) error {
	if help, _ := cmd.Flags().GetBool("help"); help {
		return pflag.ErrHelp
	}
	return usageError(cmd, "%v", err)
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

func versionLine() string {
	v := versionInfo()
	s := v["version"] + " (" + v["go"]
	if r := v["revision"]; r != "" {
		s += ", " + r
	}
	return s + ")"
}
