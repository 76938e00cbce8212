package socketapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// GET /v1/operator/events carries the filter both ways: the cursor (or
// none: from now on), the task, the wait.
func TestAPIWatchEventsRoundTrip(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	op := apiNewClient(t, s.sock, ClientOptions{})
	ctx := context.Background()
	for i, ef := range []model.EventFilter{
		{TaskID: "T-1", After: 7, Wait: 3 * time.Second},
		{After: model.AfterNow},
		{After: 0, Wait: model.MaxWatchWait},
	} {
		b, err := op.WatchEvents(ctx, ef)
		if err != nil || len(b.Events) != 1 || b.Cursor != ef.After+1 {
			t.Fatalf("WatchEvents(%+v) = %+v, %v", ef, b, err)
		}
		if got := apiLastCall(t, f, i).Args[0].(model.EventFilter); got != ef {
			t.Errorf("the service got %+v, want %+v", got, ef)
		}
	}
}

// The route refuses what is not a cursor or a wait it can keep, and caps a
// wait at 4/5 of the shorter connection deadline, so the answer always beats it.
func TestAPIWatchEventsBounds(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{WriteTimeout: 2 * time.Second})
	hc := apiRawClient(t, s.sock)
	for _, q := range []string{"after=-1", "after=x", "wait=21s", "wait=-1s", "wait=soon", "since=3"} {
		status, body := apiDo(t, hc, http.MethodGet, "/v1/operator/events?"+q, nil, "")
		if status != http.StatusBadRequest {
			t.Errorf("?%s: HTTP %d %s, want 400", q, status, body)
			continue
		}
		apiCheckErrorBody(t, q, body, model.CodeInvalidArgs)
	}
	if status, body := apiDo(t, hc, http.MethodGet, "/v1/operator/events?after=3&wait=20s", nil, ""); status != http.StatusOK {
		t.Fatalf("wait=20s: HTTP %d %s", status, body)
	}
	if got := apiLastCall(t, f, 0).Args[0].(model.EventFilter); got.Wait != 1600*time.Millisecond {
		t.Errorf("wait 20s with a 2s write deadline reached the service as %s, want 1.6s", got.Wait)
	}
}

// A waiting poll does not hold a stopping daemon: Shutdown ends its wait,
// and it answers what there is.
func TestAPIWatchEventsEndsAtShutdown(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	waiting := make(chan struct{})
	f.setHook(func(ctx context.Context, method string) error {
		if method == "WatchEvents" {
			close(waiting)
			<-ctx.Done()
		}
		return nil
	})
	s := apiServe(t, f, ServerOptions{})
	op := apiNewClient(t, s.sock, ClientOptions{})
	if _, err := op.Version(context.Background()); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		b   model.EventBatch
		err error
	}
	got := make(chan answer, 1)
	go func() {
		b, err := op.WatchEvents(context.Background(), model.EventFilter{After: 4, Wait: 20 * time.Second})
		got <- answer{b, err}
	}()
	<-waiting
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Shutdown waited %v for a long poll", d)
	}
	if a := <-got; a.err != nil || a.b.Cursor != 5 {
		t.Errorf("the poll at shutdown: %+v, %v; want its answer", a.b, a.err)
	}
	if err := <-s.done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	s.done <- nil
}
