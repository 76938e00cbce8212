// Package modelserver is a scripted model API server on 127.0.0.1: it answers the
// model APIs that the real agent adapters speak (the Anthropic Messages
// API, the OpenAI Responses and chat-completions APIs, the Gemini API),
// streaming and tool calls included, so that a real agent runs real turns
// with no network, account or model.
//
// What the model "does" is written in the prompt, one step a line:
//
//	[[tool NAME {"arg": "value"}]]   call the tool NAME with these arguments
//	[[say TEXT]]                     the final answer's text
//
// Each request is answered from the conversation it carries, so the server
// keeps no session state: the number of tool results already in the
// conversation is the index of the next tool step. When every tool step has
// had its result, the reply is the final text: the say steps (or "done"),
// then one line per tool result, clipped, so that a test reads in the
// task's result what each tool call met. A request that offers no tools
// (titles, summaries, topic checks) is answered with plain text and never
// with a call.
//
// Every request is recorded (Requests) so a test can see what the agent
// offered the model.
//
// StartWith(Options{Key: …}) serves only requests that carry the key (as
// the API key of whichever API they speak): the server listens on
// loopback, where every local user can reach it, and a verification gives
// the key to the agent it runs and to nobody else. Request bodies and what
// is recorded are bounded in bytes either way.
package modelserver

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Step is one line of a script.
type Step struct {
	Tool string          // the tool to call; "" for a say step
	Args json.RawMessage // the call's arguments (a JSON object)
	Say  string          // the text of a say step
}

// Parse reads the steps of a script out of text. A tool step's arguments
// are one JSON object (brackets inside it are fine); a tool step whose
// arguments are not a JSON object followed by "]]" is an error.
func Parse(text string) ([]Step, error) {
	var steps []Step
	for {
		i := strings.Index(text, "[[")
		if i < 0 {
			return steps, nil
		}
		text = text[i+2:]
		switch {
		case strings.HasPrefix(text, "say "):
			end := strings.Index(text, "]]")
			if end < 0 {
				return steps, nil
			}
			steps = append(steps, Step{Say: text[len("say "):end]})
			text = text[end+2:]
		case strings.HasPrefix(text, "tool "):
			rest := strings.TrimLeft(text[len("tool "):], " ")
			name, after, _ := strings.Cut(rest, " ")
			if strings.HasPrefix(name, "{") || name == "" {
				return nil, fmt.Errorf("modelserver: a tool step without a tool name")
			}
			if strings.HasSuffix(name, "]]") { // [[tool NAME]]: no arguments
				steps = append(steps, Step{Tool: strings.TrimSuffix(name, "]]"), Args: json.RawMessage("{}")})
				text = after
				continue
			}
			after = strings.TrimLeft(after, " ")
			dec := json.NewDecoder(strings.NewReader(after))
			var args json.RawMessage
			if err := dec.Decode(&args); err != nil || !strings.HasPrefix(string(args), "{") {
				return nil, fmt.Errorf("modelserver: the arguments of tool step %q are not a JSON object: %v", name, err)
			}
			tail := strings.TrimLeft(after[dec.InputOffset():], " ")
			if !strings.HasPrefix(tail, "]]") {
				return nil, fmt.Errorf("modelserver: tool step %q does not end with ]] after its arguments", name)
			}
			steps = append(steps, Step{Tool: name, Args: args})
			text = tail[2:]
		}
	}
}

// ToolStep writes a tool step for a prompt.
func ToolStep(name string, args any) string {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return "[[tool " + name + " " + string(b) + "]]"
}

// Turn is what an API handler read from one request, in API-neutral form.
type Turn struct {
	API         string   // "anthropic", "responses", "chat", "gemini"
	Path        string   // the request path
	UserText    []string // the text of every user message, in order
	Tools       []string // the names of the tools the request offers
	ToolResults []string // the text of every tool result, in order
}

// Call is a tool call the model makes.
type Call struct {
	ID   string
	Name string
	Args json.RawMessage
}

// Reply is the model's answer to one turn: a tool call, or text.
type Reply struct {
	Call *Call
	Text string
}

// Request is one recorded request and its reply.
type Request struct {
	Turn  Turn
	Reply Reply
	At    time.Time // when the request was read and decided
}

// maxResultEcho bounds each tool result quoted in the final text.
const maxResultEcho = 400

// Decide is the whole model: the reply to a turn.
func Decide(t Turn) Reply {
	var steps []Step
	for _, u := range t.UserText {
		s, err := Parse(u)
		if err != nil {
			return Reply{Text: err.Error()}
		}
		steps = append(steps, s...)
	}
	var calls []Step
	var says []string
	for _, s := range steps {
		if s.Tool != "" {
			calls = append(calls, s)
		} else {
			says = append(says, s.Say)
		}
	}
	if len(t.Tools) > 0 && len(t.ToolResults) < len(calls) {
		i := len(t.ToolResults)
		return Reply{Call: &Call{ID: fmt.Sprintf("call_%d", i+1), Name: calls[i].Tool, Args: calls[i].Args}}
	}
	var b strings.Builder
	if len(says) == 0 {
		b.WriteString("done")
	} else {
		b.WriteString(strings.Join(says, "\n"))
	}
	for i, r := range t.ToolResults {
		fmt.Fprintf(&b, "\n[result %d] %s", i+1, clip(oneLine(r), maxResultEcho))
	}
	return Reply{Text: b.String()}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Server is a running scripted model server.
type Server struct {
	ln  net.Listener
	srv *http.Server
	o   Options

	mu      sync.Mutex
	reqs    []Request
	dropped int // requests not recorded (beyond MaxRecorded)
	errs    []string
	refused int // requests refused for a missing or wrong key
}

// Options bound a server.
type Options struct {
	// Key, when set, is the API key every request must carry: an
	// x-api-key or x-goog-api-key header, an Authorization bearer token,
	// or a key query parameter. Others are refused (401) before their
	// body is read. Empty: any key, or none, is served (tests).
	Key string
	// MaxBody bounds a request body (DefaultMaxBody when zero); a larger
	// one is refused (413).
	MaxBody int64
	// MaxRecorded bounds the requests kept for Requests
	// (DefaultMaxRecorded when zero); later ones are answered but not
	// kept. Each kept text is clipped to MaxRecordedText bytes.
	MaxRecorded int
}

// Bounds of a server, by default.
const (
	DefaultMaxBody     = 32 << 20
	DefaultMaxRecorded = 4096
	// MaxRecordedText bounds each user text and tool result a recorded
	// request keeps.
	MaxRecordedText = 64 << 10
)

// StartWith listens on 127.0.0.1 on a free port and serves every API
// within o.
func StartWith(o Options) (*Server, error) {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxRecorded <= 0 {
		o.MaxRecorded = DefaultMaxRecorded
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, o: o}
	mux := http.NewServeMux()
	s.routes(mux)
	s.srv = &http.Server{Handler: s.guard(mux), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// guard refuses a request without the key, before its body is read, and
// bounds the body of the others.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.o.Key != "" && r.Method != http.MethodHead && !s.keyed(r) {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			w.Header().Set("Connection", "close")
			http.Error(w, "the scripted model server serves only the verification it was started for", http.StatusUnauthorized)
			return
		}
		if r.ContentLength > s.o.MaxBody {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBody)
		next.ServeHTTP(w, r)
	})
}

// keyed reports whether r carries the server's key, in any of the places
// the APIs put one.
func (s *Server) keyed(r *http.Request) bool {
	want := []byte(s.o.Key)
	auth, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	for _, got := range []string{r.Header.Get("X-Api-Key"), r.Header.Get("X-Goog-Api-Key"), auth, r.URL.Query().Get("key")} {
		if got != "" && subtle.ConstantTimeCompare([]byte(got), want) == 1 {
			return true
		}
	}
	return false
}

// URL is the server's base URL, http://127.0.0.1:PORT, without a path.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns every request answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// answer decides and records a turn, within MaxRecorded.
func (s *Server) answer(t Turn) Reply {
	r := Decide(t)
	kept := t
	kept.UserText = clipAll(t.UserText)
	kept.ToolResults = clipAll(t.ToolResults)
	s.mu.Lock()
	if len(s.reqs) < s.o.MaxRecorded {
		s.reqs = append(s.reqs, Request{Turn: kept, Reply: r, At: time.Now()})
	} else {
		s.dropped++
	}
	s.mu.Unlock()
	return r
}

// clipAll clips every text to MaxRecordedText bytes.
func clipAll(texts []string) []string {
	if texts == nil {
		return nil
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = clip(t, MaxRecordedText)
	}
	return out
}

// fail records and answers a request the server does not understand.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	if len(s.errs) < s.o.MaxRecorded {
		s.errs = append(s.errs, clip(r.Method+" "+r.URL.Path+": "+msg, 1024))
	}
	s.mu.Unlock()
	http.Error(w, msg, status)
}

// routes registers every API's handlers. Each API lives in its own file
// (anthropic.go, responses.go, chat.go, gemini.go) with a register
// function.
func (s *Server) routes(mux *http.ServeMux) {
	for _, reg := range registrars {
		reg(s, mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead || (r.Method == http.MethodGet && r.URL.Path == "/") {
			w.WriteHeader(http.StatusOK)
			return
		}
		s.fail(w, r, http.StatusNotFound, "the scripted model server does not serve this path")
	})
}

// registrars are filled by each API's file in its init.
var registrars []func(*Server, *http.ServeMux)

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// startSSE writes the headers of an event stream.
func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}
