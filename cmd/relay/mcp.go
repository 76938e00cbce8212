package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hai-relay/relay/facade"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

func init() {
	register(command{name: "mcp", summary: "serve the MCP stdio facade as --as AGENT (what an agent's MCP client launches)", run: runMCP})
}

func runMCP(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "mcp", "--as AGENT [--home DIR] [--no-autostart]")
	as := f.String("as", "", "the `AGENT` this facade speaks for (fixed for its lifetime)")
	noAuto := f.Bool("no-autostart", false, "do not start a daemon when none answers")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	home, err := resolveHome(f.home, e.getenv)
	if err != nil {
		return err
	}
	cfg, err := spec.LoadConfig(filepath.Join(home, "config.toml"))
	if err != nil {
		return err
	}
	if *as == "" {
		return model.Errorf(model.CodeInvalidArgs, "--as AGENT is required").
			WithHint("one of: " + joinNames(cfg.AgentNames()))
	}
	if _, ok := cfg.Agent(*as); !ok {
		return model.Errorf(model.CodeUnknownAgent, "no agent named %q", *as).
			WithHint("one of: " + joinNames(cfg.AgentNames()) + " (or define [agents." + *as + "] in config.toml)")
	}
	if e.getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	c := dial(home, *as, !*noAuto)
	defer c.Close()
	return facade.ServeMCP(ctx, c, facade.MCPOptions{Agent: *as, Cwd: cwd, Version: Version, PID: os.Getpid()}, e.stdin, e.stdout)
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
