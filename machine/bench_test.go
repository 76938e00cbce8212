package machine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// workingStore signals each transition into working.
type workingStore struct {
	model.Store
	working chan string
}

func (s workingStore) Transition(ctx context.Context, tr model.Transition) (model.Task, error) {
	t, err := s.Store.Transition(ctx, tr)
	if err == nil && tr.To == model.StateWorking {
		s.working <- tr.TaskID
	}
	return t, err
}

// BenchmarkSubmitToWorking: submit → working with the real dispatcher and
// the fake agent, against the agent's own spawn + initialize + session/new
// measured in the same loop (the floor). The authority is in-process so the
// adapter's spawn does not hide the dispatch overhead (the gates package
// measures the adapter round trip).
//
//	go test -run '^$' -bench SubmitToWorking -benchtime 30x ./machine
func BenchmarkSubmitToWorking(b *testing.B) {
	bin := dispatchtest.BuildFakeAgent(b)
	dir := b.TempDir()
	cwd := filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		b.Fatal(err)
	}
	db := persistencetest.MustOpen(b, filepath.Join(dir, "relay.db"), persistence.Options{Synchronous: persistence.SyncFull})
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "claude", Command: []string{bin}, Enabled: true}, {Name: "codex", Command: []string{bin}, Enabled: true}}, nil, nil)
	disp := dispatch.New(dispatch.Options{Registry: reg, Home: filepath.Join(dir, "home")})
	defer disp.Close()
	st := workingStore{Store: db, working: make(chan string, 1)}
	eng := machine.New(machine.Options{Store: st, Dispatcher: disp, Registry: reg, Authority: &allowAuthority{}, MaxDispatch: 1})
	ctx := context.Background()
	defer eng.Stop(ctx)

	var floor, relay time.Duration
	n := 0
	for b.Loop() {
		n++
		t0 := time.Now()
		stop := dispatchtest.DirectSession(b, bin, cwd)
		floor += time.Since(t0)
		stop()

		t1 := time.Now()
		task, _, err := eng.Submit(ctx, "codex", model.SubmitRequest{Target: "claude", Prompt: "hang",
			MissionID: "M-1", LeaseID: "S-1", Cwd: cwd})
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-st.working:
		case <-time.After(30 * time.Second):
			b.Fatalf("task %s never reached working", task.ID)
		}
		relay += time.Since(t1)
		if _, err := eng.Cancel(ctx, task.ID, model.CodeCanceledByOperator, "bench"); err != nil {
			b.Fatal(err)
		}
		for disp.Running() > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(float64(floor.Microseconds())/float64(n), "floor-µs")
	b.ReportMetric(float64(relay.Microseconds())/float64(n), "submit→working-µs")
	b.ReportMetric(float64(relay)/float64(floor), "ratio")
}
