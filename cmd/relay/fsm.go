package main

import (
	"context"
	"fmt"

	"github.com/hai-relay/relay/machine"
)

func init() {
	register(command{name: "fsm dot", summary: "print the task lifecycle as Graphviz DOT (--task ID highlights a task's path)", run: runFSMDot, noJSON: true})
}

func runFSMDot(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "fsm dot", "[--task ID] [--home DIR]   (render: relay fsm dot | dot -Tsvg > lifecycle.svg)")
	task := f.String("task", "", "highlight the path task `ID` took")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if *task == "" {
		_, err := fmt.Fprint(e.stdout, machine.Graph())
		return err
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
	_, err = fmt.Fprint(e.stdout, dot)
	return err
}
