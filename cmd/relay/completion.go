package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// What a command's positional arguments and flag values are, for shell
// completion (`relay completion bash|zsh|fish` writes the script; the
// script asks `relay __complete …`).
const (
	kindTask   = "task"
	kindAgent  = "agent"
	kindState  = "state"
	kindClient = "client"
)

var argKinds = map[string]string{
	"tasks show":    kindTask,
	"tasks cancel":  kindTask,
	"tasks watch":   kindTask,
	"agents probe":  kindAgent,
	"agents verify": kindAgent,
}

var flagKinds = map[string]string{
	"agent":  kindAgent,
	"to":     kindAgent,
	"from":   kindAgent,
	"as":     kindAgent,
	"task":   kindTask,
	"state":  kindState,
	"client": kindClient,
}

// completeCommand completes rc's positional arguments and flag values on
// c; cobra completes the flag names from c's own flags, and --home with
// directories. Task IDs and agent names come from the daemon when one
// answers on the home (within a second); agent names fall back to the
// built-in ones.
func completeCommand(ctx context.Context, e *cliIO, c *cobra.Command, rc command) {
	complete := func(kind string) cobra.CompletionFunc {
		return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			home, _ := cmd.Flags().GetString("home")
			return completions(ctx, e, home, kind, toComplete)
		}
	}
	c.ValidArgsFunction = complete(argKinds[rc.name])
	c.Flags().VisitAll(func(fl *pflag.Flag) {
		if kind, ok := flagKinds[fl.Name]; ok {
			_ = c.RegisterFlagCompletionFunc(fl.Name, complete(kind))
		}
	})
}

func completions(ctx context.Context, e *cliIO, flagHome, kind, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var words []string
	switch kind {
	case kindState:
		for _, s := range model.AllStates() {
			words = append(words, string(s))
		}
	case kindClient:
		words = clientNames()
	case kindAgent, kindTask:
		words = fromDaemon(ctx, e, flagHome, kind)
		if kind == kindAgent && len(words) == 0 {
			words = model.CoreAgents()
		}
	default:
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// fromDaemon asks a running daemon (never starting one) for agent names
// or the newest task IDs; nothing when none answers in a second.
func fromDaemon(ctx context.Context, e *cliIO, flagHome, kind string) []string {
	home, err := resolveHome(flagHome, e.getenv)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c := dial(home, "", false, io.Discard)
	defer c.Close()
	var words []string
	switch kind {
	case kindAgent:
		as, err := c.Agents(ctx)
		if err != nil {
			return nil
		}
		for _, a := range as {
			words = append(words, a.Name)
		}
	case kindTask:
		ts, err := c.Tasks(ctx, model.TaskFilter{Limit: 100})
		if err != nil {
			return nil
		}
		for _, t := range ts {
			words = append(words, t.ID)
		}
	}
	return words
}
