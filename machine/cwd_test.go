package machine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

// A cwd named through a symlink, its own or a parent's, is stored, shown
// and dispatched as the directory it resolves to: the checks and masks
// made before the agent starts are made on the directory it runs in. A
// retry naming the same directory another way is the same request.
func TestSubmitStoresCanonicalCwd(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	project := filepath.Join(root, "project")
	sub := filepath.Join(project, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")    // → project
	parent := filepath.Join(root, "other") // → root, so other/project/sub
	for p, target := range map[string]string{link: project, parent: root} {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ name, cwd, want string }{
		{"symlinked cwd", link, project},
		{"symlinked parent", filepath.Join(parent, "project", "sub"), sub},
		{"symlink inside", filepath.Join(link, "sub"), sub},
		{"canonical already", sub, sub},
	}
	for _, c := range cases {
		dispatched := make(chan string, 1)
		disp := &fakeDispatcher{policy: denyAll, run: func(task model.Task, rep model.RunReporter) {
			dispatched <- task.Cwd
			_ = rep.Finished(context.Background(), task.ID, model.Outcome{State: model.StateCompleted})
		}}
		r := newRig(t, machine.Options{Authority: &allowAuthority{}, Dispatcher: disp})
		task := r.submit(t, model.SubmitRequest{Cwd: c.cwd, IdempotencyKey: "k"})
		if task.Cwd != c.want {
			t.Errorf("%s: Submit returned cwd %q, want %q", c.name, task.Cwd, c.want)
		}
		if got, err := r.eng.Get(context.Background(), task.ID); err != nil || got.Cwd != c.want {
			t.Errorf("%s: stored cwd %q (%v), want %q", c.name, got.Cwd, err, c.want)
		}
		if got := <-dispatched; got != c.want {
			t.Errorf("%s: dispatched in %q, want %q", c.name, got, c.want)
		}
		// The same request naming the canonical path is a retry, not a
		// conflict.
		again, existed, err := r.eng.Submit(context.Background(), "codex", model.SubmitRequest{Target: "claude",
			Prompt: "summarize README.md", Cwd: c.want, MissionID: "M-1", LeaseID: "S-1", IdempotencyKey: "k"})
		if err != nil || !existed || again.ID != task.ID {
			t.Errorf("%s: retry through the canonical path = %s, %v, %v; want %s, an existing task", c.name, again.ID, existed, err, task.ID)
		}
	}
}

// A symlink to something that is not a directory, or to nothing, is
// still invalid_cwd, and stores nothing.
func TestSubmitRefusesCwdSymlinkToNoDirectory(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-file": file, "dangling": filepath.Join(root, "nope")} {
		p := filepath.Join(root, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		_, _, err := r.eng.Submit(context.Background(), "codex", model.SubmitRequest{Target: "claude", Prompt: "p",
			Cwd: p, MissionID: "M-1", LeaseID: "S-1"})
		if model.ErrorCode(err) != model.CodeInvalidCwd {
			t.Errorf("%s: code %q (%v), want %q", name, model.ErrorCode(err), err, model.CodeInvalidCwd)
		}
	}
	if ts, _ := r.eng.List(context.Background(), model.TaskFilter{}); len(ts) != 0 {
		t.Fatalf("%d tasks persisted by refused requests", len(ts))
	}
}
