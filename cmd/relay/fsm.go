package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "fsm dot", summary: "print the task lifecycle as Graphviz DOT (--task ID highlights a task's path)", usage: "[--task ID] [--svg] [--home DIR]", setup: fsmDotCommand, noJSON: true})
}

func fsmDotCommand(f *flags) runFunc {
	task := f.String("task", "", "highlight the path task `ID` took")
	svg := f.Bool("svg", false, "render the graph as SVG with Graphviz (dot on PATH) instead of printing DOT")
	return func(ctx context.Context, e *cliIO) error { return runFSMDot(ctx, e, f, task, svg) }
}

func runFSMDot(ctx context.Context, e *cliIO, f *flags, task *string, svg *bool) error {
	out := func(dot string) error {
		if *svg {
			return renderSVG(ctx, e, dot)
		}
		_, err := fmt.Fprint(e.stdout, dot)
		return err
	}
	if *task == "" {
		return out(machine.Graph())
	}
	home, err := resolveHome(f.home, e.getenv)
	if err != nil {
		return err
	}
	db, err := openExisting(ctx, home)
	if err != nil {
		return err
	}
	defer db.Close()
	dot, err := machine.TaskGraph(ctx, db, *task)
	if err != nil {
		return err
	}
	return out(dot)
}

// renderSVG writes dot rendered by Graphviz's dot -Tsvg to stdout.
func renderSVG(ctx context.Context, e *cliIO, dot string) error {
	bin, err := exec.LookPath("dot")
	if err != nil {
		return model.Errorf(model.CodeInvalidArgs, "--svg needs Graphviz's dot, which is not on PATH").
			WithHint("install Graphviz (apt-get install graphviz, brew install graphviz, dnf install graphviz), or drop --svg and render the DOT elsewhere")
	}
	cmd := exec.CommandContext(ctx, bin, "-Tsvg")
	cmd.Stdin = strings.NewReader(dot)
	cmd.Stdout = e.stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return model.Errorf(model.CodeInternal, "dot -Tsvg: %v: %s", err, model.Clip(stderr.String(), 400)).
			WithHint("run `relay fsm dot | dot -Tsvg` to see Graphviz's own output")
	}
	return nil
}
