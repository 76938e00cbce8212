package machine_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

var update = flag.Bool("update", false, "rewrite golden files")

const goldenDOT = "../spec/lifecycle.dot"

func TestGoldenDOT(t *testing.T) {
	got := machine.Graph()
	if *update {
		if err := os.WriteFile(goldenDOT, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenDOT)
	if err != nil {
		t.Fatalf("%v (run `go test ./machine -run TestGoldenDOT -update`)", err)
	}
	if got != string(want) {
		t.Fatalf("lifecycle graph differs from %s; if the change is intended, run `go test ./machine -run TestGoldenDOT -update`\n--- got\n%s", goldenDOT, got)
	}
	for _, g := range model.AllGates() {
		if !strings.Contains(got, string(g)) {
			t.Errorf("graph does not name guard %s", g)
		}
	}
	for _, s := range model.AllStates() {
		if !strings.Contains(got, "\t"+string(s)+" [") {
			t.Errorf("graph has no node for %s", s)
		}
	}
	if !strings.Contains(got, "dispatch") {
		t.Error("graph does not show the dispatch entry action of authorized")
	}
}

// graphviz renders dot to SVG with the real Graphviz; the test command
// installs it, so a missing binary is a failure, not a skip.
func graphviz(t *testing.T, dot string) []byte {
	t.Helper()
	bin, err := exec.LookPath("dot")
	if err != nil {
		t.Fatal("graphviz `dot` is not installed; scripts/test installs it (apt-get install graphviz)")
	}
	cmd := exec.Command(bin, "-Tsvg")
	cmd.Stdin = strings.NewReader(dot)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("dot -Tsvg refused the graph: %v\n%s", err, errb.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("<svg")) {
		t.Fatal("dot produced no SVG")
	}
	return out.Bytes()
}

func TestGraphvizAcceptsLifecycle(t *testing.T) {
	t.Parallel()
	svg := graphviz(t, machine.Graph())
	for _, g := range model.AllGates() {
		if !bytes.Contains(svg, []byte(g)) {
			t.Errorf("rendered SVG lacks guard %s", g)
		}
	}
}

func TestTaskGraphHighlightsThePathTaken(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()
	task := terminalTask(t, r, model.StateCompleted)
	dot, err := machine.TaskGraph(ctx, r.db, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	highlighted := func(from, to model.State) bool {
		for _, l := range strings.Split(dot, "\n") {
			if strings.HasPrefix(l, "\t"+string(from)+" -> "+string(to)+" [") {
				return strings.Contains(l, "penwidth")
			}
		}
		t.Fatalf("no edge %s -> %s in\n%s", from, to, dot)
		return false
	}
	for _, e := range [][2]model.State{{"submitted", "authorized"}, {"authorized", "working"}, {"working", "completed"}} {
		if !highlighted(e[0], e[1]) {
			t.Errorf("edge %s -> %s taken but not highlighted", e[0], e[1])
		}
	}
	for _, e := range [][2]model.State{{"submitted", "rejected"}, {"working", "failed"}, {"authorized", "canceled"}} {
		if highlighted(e[0], e[1]) {
			t.Errorf("edge %s -> %s not taken but highlighted", e[0], e[1])
		}
	}
	if !strings.Contains(dot, task.ID) {
		t.Error("graph does not name the task")
	}
	// The start arrow is where every task starts, not where this one is.
	if !strings.Contains(dot, "\tinit -> submitted") || strings.Contains(dot, "\tinit -> completed") {
		t.Errorf("the initial arrow of a completed task's graph does not point at submitted:\n%s", dot)
	}
	graphviz(t, dot)

	_, err = machine.TaskGraph(ctx, r.db, "T-nope")
	wantCode(t, err, model.CodeNotFound)
}
