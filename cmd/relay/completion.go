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

// complete completes the word toComplete of command rc after args: a
// flag name, a flag's value, or a positional argument. Task IDs and
// agent names come from the daemon when one answers on the home (within
// a second); agent names fall back to the built-in ones.
func complete(ctx context.Context, e *env, rc command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	f := describeFlags(ctx, e, rc)
	if f == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if strings.HasPrefix(toComplete, "-") {
		var out []cobra.Completion
		f.VisitAll(func(fl *pflag.Flag) {
			if name := "--" + fl.Name; strings.HasPrefix(name, toComplete) {
				_, usage := pflag.UnquoteUsage(fl)
				out = append(out, cobra.CompletionWithDesc(name, usage))
			}
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	// The home the completed command would use, if given.
	home := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--home" {
			home = args[i+1]
		} else if v, ok := strings.CutPrefix(args[i], "--home="); ok {
			home = v
		}
	}
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "--") {
		name := strings.TrimPrefix(args[n-1], "--")
		if name == "home" {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		if fl := f.Lookup(name); fl != nil && fl.Value.Type() != "bool" {
			return completions(ctx, e, home, flagKinds[name], toComplete)
		}
	}
	return completions(ctx, e, home, argKinds[rc.name], toComplete)
}

func completions(ctx context.Context, e *env, flagHome, kind, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
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
func fromDaemon(ctx context.Context, e *env, flagHome, kind string) []string {
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
