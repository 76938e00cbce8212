package machine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
	"github.com/qmuntal/stateless"
)

var errGraphOnly = errors.New("graph machines do not fire")

// Graph returns the lifecycle as Graphviz DOT, rendered by stateless from
// the same definition the engine runs, so guard names (missionLease, …) and
// the dispatch entry action appear as they are wired.
func Graph() string {
	return graphAt(spec.InitialState)
}

func graphAt(current model.State) string {
	sm := build(func(context.Context) (stateless.State, error) { return current, nil },
		func(context.Context, stateless.State) error { return errGraphOnly })
	return sm.ToGraph()
}

// TaskGraph returns the lifecycle DOT with the path the task actually took
// highlighted: the edges of its events and the states it visited.
func TaskGraph(ctx context.Context, store model.Store, id string) (string, error) {
	t, err := store.GetTask(ctx, id)
	if err != nil {
		return "", err
	}
	evs, err := store.TaskEvents(ctx, id)
	if err != nil {
		return "", err
	}
	// The initial arrow stays at submitted, where every task starts; the
	// state the task is in is the filled node.
	return Highlight(Graph(), t, evs), nil
}

// Highlight marks the task's visited states and taken edges in a DOT graph
// produced by Graph.
func Highlight(dot string, t model.Task, evs []model.Event) string {
	const style = `color="#d62728", fontcolor="#d62728", penwidth=2.5, `
	visited := map[model.State]bool{spec.InitialState: true}
	edges := map[string]bool{}
	for _, ev := range evs {
		visited[ev.From], visited[ev.To] = true, true
		edges[fmt.Sprintf("\t%s -> %s [", ev.From, ev.To)] = true
	}
	lines := strings.Split(dot, "\n")
	for i, l := range lines {
		for prefix := range edges {
			if strings.HasPrefix(l, prefix) {
				lines[i] = prefix + style + l[len(prefix):]
			}
		}
		for s := range visited {
			prefix := fmt.Sprintf("\t%s [", s)
			if strings.HasPrefix(l, prefix) {
				extra := style
				if s == t.State {
					extra += `style=filled, fillcolor="#fde0dd", `
				}
				lines[i] = prefix + extra + l[len(prefix):]
			}
		}
	}
	out := strings.Join(lines, "\n")
	label := fmt.Sprintf("\tlabel=%q;\n\tlabelloc=t;\n", fmt.Sprintf("task %s: %s %s", t.ID, t.State, t.Code))
	return strings.Replace(out, "digraph {\n", "digraph {\n"+label, 1)
}
