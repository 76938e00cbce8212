package socketapi

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hai-relay/relay/model"
)

// DaemonStatus is the answer of GET /v1/operator/status: what the daemon
// behind the socket is and what it is doing.
type DaemonStatus struct {
	PID       int       `json:"pid"`
	Home      string    `json:"home"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// UptimeSeconds is how long the daemon has run, in whole seconds.
	UptimeSeconds int64 `json:"uptime_seconds"`
	// TasksRunning counts the tasks authorized or working; TasksQueued
	// those submitted (waiting for their gates or a dispatch slot).
	TasksRunning int `json:"tasks_running"`
	TasksQueued  int `json:"tasks_queued"`
	// Facades are the facades (relay mcp) that announced themselves
	// (POST /v1/connections) and whose process still runs.
	Facades []Facade `json:"facades"`
	// Autostarted says the daemon was started on demand by a facade
	// (relay daemon --autostarted); only such a daemon exits when idle.
	Autostarted bool `json:"autostarted"`
	// IdleTimeout is how long an autostarted daemon stays up with nothing
	// to do ([daemon] idle_timeout), as a Go duration; "0s" means never.
	// It is absent for a daemon started by hand, which never idles out.
	IdleTimeout string `json:"idle_timeout,omitempty"`
	// StartedBy says who started the daemon.
	StartedBy StartedBy `json:"started_by"`
	// Path is the PATH the daemon resolves agent commands through and
	// gives every process it starts: the safe entries of PathPinned
	// (symbolic links resolved).
	Path string `json:"path"`
	// PathSource says where PathPinned came from: "config" ([daemon]
	// path), "pinned" (the file the first start by hand wrote in the
	// home) or "default" (neither: the system's directories).
	PathSource string `json:"path_source"`
	// PathPinned is that PATH as configured or pinned.
	PathPinned string `json:"path_pinned"`
	// PathSkipped are the entries of PathPinned that are not used, and
	// why (relative, missing, group- or other-writable, owned by another
	// user).
	PathSkipped []PathSkip `json:"path_skipped"`
	// Env names the variables of the daemon's environment, which its
	// agents start from, sorted. Names only: a value is never shown.
	Env []string `json:"env"`
	// EnvRemoved names the code-loading variables the daemon was started
	// with and removed from its environment.
	EnvRemoved []string `json:"env_removed"`
	// Sandbox says whether the sandbox every agent runs in can run for
	// this daemon (its PATH, its user, this kernel).
	Sandbox SandboxStatus `json:"sandbox"`
}

// SandboxStatus is whether the sandbox every agent runs in can run: when
// it cannot, every task fails agent_sandbox_unavailable, and Fix says
// what to do.
type SandboxStatus struct {
	OK bool `json:"ok"`
	// Layers names what holds the sandbox ("bubblewrap + Landlock ABI 6").
	Layers  string `json:"layers,omitempty"`
	Problem string `json:"problem,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// StartedBy is who started a daemon.
type StartedBy struct {
	// By is "hand" (relay daemon) or "autostart" (a facade, relay mcp,
	// that found no daemon).
	By string `json:"by"`
	// Agent is the agent of the facade that started it (autostart).
	Agent string `json:"agent,omitempty"`
	// PID is the facade's pid (autostart), else the daemon's parent's at
	// its start (the shell or service manager).
	PID int `json:"pid"`
	// Cwd is the facade's working directory (autostart), else the one the
	// daemon was started in. The daemon itself runs in its home.
	Cwd string `json:"cwd"`
}

// PathSkip is one PATH entry a daemon does not use.
type PathSkip struct {
	Entry  string `json:"entry"`
	Reason string `json:"reason"`
}

// Facade is one connected facade.
type Facade struct {
	Agent string    `json:"agent"`
	PID   int       `json:"pid"`
	Kind  string    `json:"kind"`
	Since time.Time `json:"since"`
}

// StopAnswer is the answer of POST /v1/operator/stop: the daemon
// accepted to stop and begins its graceful stop once the answer is sent.
type StopAnswer struct {
	PID      int  `json:"pid"`
	Stopping bool `json:"stopping"`
}

// DaemonHooks are what the daemon lends the socket server for its own
// routes (ServeDaemon).
type DaemonHooks struct {
	// Status fills in what only the daemon knows (pid, home, version,
	// start, task counts, autostart); the server adds the facades.
	Status func(ctx context.Context) (DaemonStatus, error)
	// Stop asks the daemon to stop gracefully, as SIGTERM does. It must
	// not block, and may be called more than once.
	Stop func()
	// Prune runs one pass of the retention policy for the operator
	// (relay prune), bounded in time: a report with More asks for another
	// call. Nil: the route answers internal.
	Prune func(ctx context.Context, r model.PruneRequest) (model.PruneReport, error)
}

// ServeDaemon adds the daemon's own operator routes, GET
// /v1/operator/status, POST /v1/operator/stop and POST
// /v1/operator/prune. Call it before Serve.
func (s *Server) ServeDaemon(h DaemonHooks) {
	s.route("GET /v1/operator/status", false, nil, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		st, err := h.Status(r.Context())
		if err != nil {
			return nil, err
		}
		st.Facades = nonNil(s.facades.live())
		return st, nil
	})
	s.route("POST /v1/operator/stop", false, nil, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		if err := DecodeEmpty(r.Body, s.o.MaxBody); err != nil {
			return nil, err
		}
		// The graceful stop waits for in-flight requests, this one
		// included: the answer is sent before the socket closes.
		h.Stop()
		return StopAnswer{PID: os.Getpid(), Stopping: true}, nil
	})
	s.route("POST /v1/operator/prune", false, []string{"dry_run", "acked_messages", "terminal_tasks", "audit"}, s.handlePrune(h))
}

// handlePrune is POST /v1/operator/prune?dry_run=&acked_messages=&terminal_tasks=:
// one pass of the retention policy, the durations (Go durations, "0" to
// keep forever) replacing the configured ones for this pass.
func (s *Server) handlePrune(h DaemonHooks) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		if err := DecodeEmpty(r.Body, s.o.MaxBody); err != nil {
			return nil, err
		}
		q := r.URL.Query()
		var req model.PruneRequest
		var err error
		if req.DryRun, err = queryBool(q, "dry_run", false); err != nil {
			return nil, err
		}
		for name, dst := range map[string]**time.Duration{"acked_messages": &req.AckedMessages, "terminal_tasks": &req.TerminalTasks, "audit": &req.Audit} {
			if !q.Has(name) {
				continue
			}
			d, err := queryDuration(q, name)
			if err != nil {
				return nil, err
			}
			*dst = &d
		}
		if h.Prune == nil {
			return nil, model.Errorf(model.CodeInternal, "this daemon does not prune")
		}
		return h.Prune(r.Context(), req)
	}
}

// Facades returns the facades connected now: those that announced
// themselves on POST /v1/connections (kind "mcp") and whose process, named
// by the connection's SO_PEERCRED pid, still runs. A facade holds no
// connection open between calls, so its process is what says it is
// there: it runs as long as its MCP client keeps it.
func (s *Server) Facades() []Facade { return s.facades.live() }

// Activity returns the number of requests being served now and when the
// last one ended (or began, while one runs). GET /v1/operator/status and
// GET /v1/version are not counted: looking at an idle daemon does not
// keep it up.
func (s *Server) Activity() (inFlight int, last time.Time) {
	return int(s.inFlight.Load()), time.Unix(0, s.lastActive.Load())
}

// Pause holds every request that arrives from now on before it is
// served, then waits until no request counted by Activity is being
// served (or ctx ends: its error). A held request is served after Resume,
// or answered daemon_unavailable ("nothing was done") when Shutdown
// begins. This is how the daemon stops when idle without racing a
// request: stop serving first, look again, then stop for good or Resume.
// Pause and Resume may be called more than once.
func (s *Server) Pause(ctx context.Context) error {
	s.gateMu.Lock()
	if s.resume == nil {
		s.resume = make(chan struct{})
	}
	s.gateMu.Unlock()
	for s.inFlight.Load() > 0 {
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Resume serves the requests Pause held, and every request after them.
func (s *Server) Resume() {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	if s.resume != nil {
		close(s.resume)
		s.resume = nil
	}
}

// Held returns the number of requests Pause is holding now.
func (s *Server) Held() int {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	return s.held
}

// admit lets r be served: at once, or once Resume lets the requests Pause
// held go; ok is false when Shutdown began first (r was not served). It
// counts r in Activity, under the same lock Pause takes, so that a
// request is either counted before Pause waits for the count to drain,
// or held; the returned func ends it. GET /v1/operator/status and GET
// /v1/version are held but not counted: looking at an idle daemon does not keep it up.
func (s *Server) admit(r *http.Request) (end func(), ok bool) {
	counted := !(r.Method == http.MethodGet && (r.URL.Path == "/v1/operator/status" || r.URL.Path == "/v1/version"))
	s.gateMu.Lock()
	for s.resume != nil {
		wait := s.resume
		s.held++
		s.gateMu.Unlock()
		select {
		case <-wait:
		case <-s.down.Done():
		}
		s.gateMu.Lock()
		s.held--
		if s.down.Err() != nil {
			s.gateMu.Unlock()
			return nil, false
		}
	}
	if counted {
		s.inFlight.Add(1)
		s.lastActive.Store(time.Now().UnixNano())
	}
	s.gateMu.Unlock()
	return func() {
		if counted {
			s.lastActive.Store(time.Now().UnixNano())
			s.inFlight.Add(-1)
		}
	}, true
}

// facadeSet is the facades that announced themselves, by pid.
type facadeSet struct {
	mu sync.Mutex
	m  map[int]facadeEntry
}

type facadeEntry struct {
	Facade
	start string // the process's start time (/proc/PID/stat), against pid reuse
}

// add records a facade's connection; a facade with the same pid replaces
// the one before (one process, one facade).
func (f *facadeSet) add(c model.Conn) {
	if c.Kind != "mcp" || c.PID <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[int]facadeEntry{}
	}
	if e, ok := f.m[c.PID]; ok && e.Agent == c.Agent && e.start == procStart(c.PID) {
		return // the same facade, again (a new MCP session)
	}
	f.m[c.PID] = facadeEntry{Facade: Facade{Agent: c.Agent, PID: c.PID, Kind: c.Kind, Since: time.Now().UTC()}, start: procStart(c.PID)}
}

// live drops the facades whose process is gone and returns the others,
// oldest first.
func (f *facadeSet) live() []Facade {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Facade
	for pid, e := range f.m {
		if !procAlive(pid, e.start) {
			delete(f.m, pid)
			continue
		}
		out = append(out, e.Facade)
	}
	slices.SortFunc(out, func(a, b Facade) int { return a.Since.Compare(b.Since) })
	return out
}

// DaemonStatus asks the daemon what it is and what it is doing.
func (c *Client) DaemonStatus(ctx context.Context) (DaemonStatus, error) {
	var st DaemonStatus
	err := c.call(ctx, http.MethodGet, "/v1/operator/status", nil, nil, &st)
	return st, err
}

// Prune asks the daemon for one pass of its retention policy (see
// DaemonHooks.Prune); a report with More asks for another call.
func (c *Client) Prune(ctx context.Context, r model.PruneRequest) (model.PruneReport, error) {
	q := url.Values{}
	if r.DryRun {
		q.Set("dry_run", "true")
	}
	if r.AckedMessages != nil {
		q.Set("acked_messages", r.AckedMessages.String())
	}
	if r.TerminalTasks != nil {
		q.Set("terminal_tasks", r.TerminalTasks.String())
	}
	if r.Audit != nil {
		q.Set("audit", r.Audit.String())
	}
	var rep model.PruneReport
	err := c.call(ctx, http.MethodPost, "/v1/operator/prune", q, nil, &rep)
	return rep, err
}

// StopDaemon asks the daemon to stop gracefully. It returns once the
// daemon accepted; the daemon then stops on its own time (the caller
// waits for its pid to go).
func (c *Client) StopDaemon(ctx context.Context) (StopAnswer, error) {
	var a StopAnswer
	err := c.call(ctx, http.MethodPost, "/v1/operator/stop", nil, nil, &a)
	return a, err
}
