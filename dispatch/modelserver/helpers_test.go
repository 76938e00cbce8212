package modelserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The helpers every API's tests share: a server, a POST, an event stream.

// start starts a scripted server, closed when the test ends.
func start(t *testing.T) *Server {
	t.Helper()
	s, err := StartWith(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A postOption changes the request post sends or how it checks the reply.
type postOption func(*postConfig)

type postConfig struct {
	header    http.Header
	anyStatus bool
}

// anyStatus has post return a reply of any status, for the test to check.
func anyStatus(c *postConfig) { c.anyStatus = true }

// withHeaders has post send headers besides Content-Type, as key, value
// pairs.
func withHeaders(kv ...string) postOption {
	if len(kv)%2 != 0 {
		panic("withHeaders: a key without a value")
	}
	return func(c *postConfig) {
		for i := 0; i < len(kv); i += 2 {
			c.header.Set(kv[i], kv[i+1])
		}
	}
}

// post sends body to path as JSON: a string or a []byte as it is, any other
// value marshalled. The reply's body is closed when the test ends, and a
// status other than 200 fails the test unless anyStatus is passed.
func post(t *testing.T, s *Server, path string, body any, opts ...postOption) *http.Response {
	t.Helper()
	c := postConfig{header: http.Header{"Content-Type": {"application/json"}}}
	for _, o := range opts {
		o(&c)
	}
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, s.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if !c.anyStatus && resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s: %s", path, resp.Status, msg)
	}
	return resp
}

// checkContentType fails the test unless the reply's Content-Type is want.
func checkContentType(t *testing.T, resp *http.Response, want string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != want {
		t.Fatalf("Content-Type %q, want %q", ct, want)
	}
}

// sseEvent is one server-sent event: its name ("" when it has none), its
// data as sent, and that data decoded (nil for "[DONE]").
type sseEvent struct {
	Event string
	Raw   string
	Data  map[string]any
}

// readSSE reads a reply's event stream to its end. Every line must name an
// event, carry its data or end it; every event has one data line, a JSON
// object or "[DONE]".
func readSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	hasData := false
	end := func() {
		switch {
		case hasData:
			out = append(out, cur)
		case cur.Event != "":
			t.Fatalf("event %q has no data", cur.Event)
		}
		cur, hasData = sseEvent{}, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			end()
			continue
		}
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			cur.Event = name
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		if hasData {
			t.Fatalf("event %q has a second data line %q", cur.Event, line)
		}
		cur.Raw, hasData = data, true
		if data == "[DONE]" {
			continue
		}
		if err := json.Unmarshal([]byte(data), &cur.Data); err != nil {
			t.Fatalf("event %q: data %q is not a JSON object: %v", cur.Event, data, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	end()
	return out
}

// checkEventTypes checks every event's data "type" is its event name, as
// the Anthropic and Responses streams have it.
func checkEventTypes(t *testing.T, events []sseEvent) {
	t.Helper()
	for _, e := range events {
		if e.Data["type"] != e.Event {
			t.Errorf("event %q carries data of type %v", e.Event, e.Data["type"])
		}
	}
}
