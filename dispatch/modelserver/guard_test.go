package modelserver_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hai-relay/relay/dispatch/modelserver"
)

// countingZeros is an endless body of zeros that counts what was read of
// it.
type countingZeros struct {
	n     atomic.Int64
	limit int64
}

func (c *countingZeros) Read(p []byte) (int, error) {
	if c.n.Load() >= c.limit {
		return 0, io.EOF
	}
	clear(p)
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func post(t *testing.T, url, key string, body io.Reader, length int64) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0 // the server closed the connection on a body it will not read
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// A keyed server serves only requests that carry its key; a local user
// without it is refused before the body is read, however large, and
// nothing of the request is kept.
func TestKeyedServerRefusesOthersUnread(t *testing.T) {
	t.Parallel()
	srv, err := modelserver.StartWith(modelserver.Options{Key: "the-key"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const gib = 1 << 30
	for _, c := range []struct {
		name, key string
		length    int64 // -1: chunked
	}{
		{"no key, 1 GiB declared", "", gib},
		{"no key, 1 GiB chunked", "", -1},
		{"wrong key, 1 GiB chunked", "not-the-key", -1},
	} {
		body := &countingZeros{limit: gib}
		status := post(t, srv.URL(), c.key, body, c.length)
		if status != 0 && status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, status)
		}
		if n := body.n.Load(); n > 64<<20 {
			t.Errorf("%s: the server took %d MiB of a body it should not read", c.name, n>>20)
		}
	}
	if got := srv.Requests(); len(got) != 0 || srv.Refused() != 3 {
		t.Fatalf("kept %d requests, refused %d; want none kept, 3 refused", len(got), srv.Refused())
	}
	// The key in each place an API puts it is served.
	for _, hdr := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"[[say hi]]"}]}`))
		req.Header.Set(hdr, "the-key")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("key in %s: status %d", hdr, res.StatusCode)
		}
	}
	if status := post(t, srv.URL(), "the-key", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"[[say hi]]"}]}`), -1); status != http.StatusOK {
		t.Errorf("bearer key: status %d", status)
	}
}

// Even with the key, a body is bounded, and so is what is recorded.
func TestServerBoundsBodiesAndRecords(t *testing.T) {
	t.Parallel()
	srv, err := modelserver.StartWith(modelserver.Options{Key: "k", MaxBody: 1 << 20, MaxRecorded: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body := &countingZeros{limit: 1 << 30}
	if status := post(t, srv.URL(), "k", body, -1); status == http.StatusOK {
		t.Errorf("a 1 GiB body was served")
	}
	if n := body.n.Load(); n > 64<<20 {
		t.Errorf("the server took %d MiB of a body over its bound", n>>20)
	}
	if status := post(t, srv.URL(), "k", &countingZeros{limit: 1 << 30}, 2<<20); status != http.StatusRequestEntityTooLarge && status != 0 {
		t.Errorf("declared 2 MiB over a 1 MiB bound: status %d", status)
	}
	long := strings.Repeat("x", modelserver.MaxRecordedText*2)
	for i := 0; i < 5; i++ {
		msg := `{"model":"m","messages":[{"role":"user","content":"` + long + ` [[say hi]]"}]}`
		if status := post(t, srv.URL(), "k", bytes.NewReader([]byte(msg)), int64(len(msg))); status != http.StatusOK {
			t.Fatalf("request %d: status %d", i, status)
		}
	}
	got := srv.Requests()
	if len(got) != 3 {
		t.Fatalf("kept %d requests, want the first 3", len(got))
	}
	for _, r := range got {
		for _, u := range r.Turn.UserText {
			if len(u) > modelserver.MaxRecordedText+len("…") {
				t.Errorf("a recorded text of %d bytes", len(u))
			}
		}
	}
}
