package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
)

// BenchmarkDispatchOverhead measures Dispatch → Started (spawn, initialize,
// session/new, mode check, Started) against the bare floor measured in the
// same loop: the fake agent's own spawn + initialize + session/new with
// the SDK and nothing else. It reports both and their ratio.
func BenchmarkDispatchOverhead(b *testing.B) {
	bin := dispatchtest.BuildFakeAgent(b)
	dir := b.TempDir()
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		b.Fatal(err)
	}
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "fake", Command: []string{bin}, Enabled: true}}, nil, nil)
	d := dispatch.New(dispatch.Options{Registry: reg, Home: filepath.Join(dir, "home")})
	defer d.Close()
	ctx := context.Background()

	var direct, viaDispatch time.Duration
	n := 0
	floor := func() {
		// The floor: spawn + initialize + session/new, straight SDK.
		t0 := time.Now()
		stop := dispatchtest.DirectSession(b, bin, cwd)
		direct += time.Since(t0)
		stop()
	}
	dispatched := func() {
		// The dispatcher: Dispatch → Started.
		r := newRecorder()
		task := model.Task{ID: "B-" + strconv.Itoa(n), Target: "fake", Prompt: "echo hi", Mode: model.ModeReadOnly, Cwd: cwd}
		t1 := time.Now()
		if err := d.Dispatch(ctx, task, r); err != nil {
			b.Fatal(err)
		}
		r.waitStarted(b)
		viaDispatch += time.Since(t1)
		if out := r.waitFinished(b); out.State != model.StateCompleted {
			b.Fatalf("outcome %+v", out)
		}
	}
	for b.Loop() {
		n++
		// Alternate the order so neither side always runs first.
		if n%2 == 0 {
			floor()
			dispatched()
		} else {
			dispatched()
			floor()
		}
	}
	b.ReportMetric(float64(direct.Nanoseconds())/float64(n), "direct-ns/op")
	b.ReportMetric(float64(viaDispatch.Nanoseconds())/float64(n), "dispatch-ns/op")
	b.ReportMetric(float64(viaDispatch)/float64(direct), "ratio")
}
