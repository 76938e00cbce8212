package socketapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// APIVersion is the version of the socket API's wire contract, the N of
// its /vN/ routes: a change that breaks it moves the routes, so a daemon
// of another version answers not_found to what it does not speak. Every
// request carries it in APIHeader, and the daemon refuses one of another
// version before it reads the body; every answer carries the daemon's in
// APIHeader (and its relay version in VersionHeader), and the client
// refuses an answer of another version. No round trip is spent on it.
const APIVersion = 1

// APIHeader carries APIVersion on every request and every answer.
const APIHeader = "X-Relay-API"

// VersionHeader carries the daemon's relay version on every answer.
const VersionHeader = "X-Relay-Version"

// apiVersionText is APIVersion as APIHeader carries it.
var apiVersionText = strconv.Itoa(APIVersion)

// AgentHeader carries the calling agent's identity on agent routes. The
// facade that sends it has its identity fixed at launch; the daemon trusts
// it because only the socket owner's processes can connect (SO_PEERCRED).
const AgentHeader = "X-Relay-Agent"

// DefaultMaxBody bounds a request body when ServerOptions.MaxBody is 0.
const DefaultMaxBody int64 = 4 << 20

// DefaultMaxAnswer bounds an answer's body when ServerOptions.MaxAnswer is
// 0: half of what the socket client reads (64 MiB). Listings stop far
// below it (model.AnswerBytes) and one stored item encodes to less (every
// stored field arrives in a request of at most DefaultMaxBody, which
// escapes to at most 6 times that); it is the backstop that turns an
// answer too large to deliver into a prompt error instead of a cut
// stream.
const DefaultMaxAnswer = 32 << 20

// Default per-connection deadlines of the socket server.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	// defaultProbeTimeout is what a probe may take when the request names
	// no timeout; the probe route's write deadline is stretched by it.
	defaultProbeTimeout = model.DefaultProbeTimeout
	// defaultVerifyTimeout is what a hardening verification may take when
	// the request names no timeout.
	defaultVerifyTimeout = model.DefaultVerifyTimeout
)

// VersionInfo is the answer of GET /v1/version.
type VersionInfo struct {
	Version string `json:"version"`
	API     int    `json:"api"`
}

// ServerOptions configures NewServer.
type ServerOptions struct {
	// Version is the relay's version, reported by GET /v1/version.
	Version string
	// Logger receives internal errors (once each) and refused peers; nil
	// discards.
	Logger *slog.Logger
	// UID is the only peer uid accepted; 0 means os.Getuid().
	UID int
	// PeerCred returns a connection's peer credentials; nil means PeerCred
	// (SO_PEERCRED). Tests inject their own.
	PeerCred func(net.Conn) (uid, pid int, err error)
	// OnRefused is called (synchronously, from the accept loop) for every
	// connection refused by the uid check; uid and pid are -1 when the
	// credentials could not be read. The daemon audits it.
	OnRefused func(ctx context.Context, uid, pid int)
	// MaxBody bounds a request body; 0 means DefaultMaxBody.
	MaxBody int64
	// ProbeTimeout is what a probe without ?timeout may take (the
	// daemon's limits.probe_timeout); 0 means 60 s. The probe route's
	// write deadline is stretched by it.
	ProbeTimeout time.Duration
	// RefusalBurst and RefusalEvery bound the log lines of refused
	// requests per agent (a token bucket); zero means the defaults.
	RefusalBurst int
	RefusalEvery time.Duration
	// Clock is the budget's clock (default time.Now).
	Clock func() time.Time
	// MaxAnswer bounds an answer's body; 0 means DefaultMaxAnswer.
	MaxAnswer int
	// TaskOf, when set, places the process pid: the running task inside
	// whose sandbox it runs and that task's target, or "" and "" for a
	// top-level process; an error when it cannot place it while tasks run
	// (pid 0: the peer that connected is gone or replaced). A peer inside
	// a task acts only as its target (any other identity is refused,
	// identity_mismatch), and a submission or a message it makes is made
	// inside the task (model.SubmitRequest.ParentTaskID): the chain comes
	// from the kernel's word on who connected, never from the request. Nil:
	// every peer is a top-level caller.
	TaskOf func(pid int) (taskID, target string, err error)
	// OnIdentityRefused, when set, is called for each request refused
	// identity_mismatch (to audit it): the identity claimed, the task the
	// peer runs inside and its target ("" when it could not be placed),
	// the peer's pid, and why.
	OnIdentityRefused func(ctx context.Context, claimed, taskID, target string, pid int, why string)
	// KnownAgent, when set, says whether a name is an agent of this relay:
	// a request whose X-Relay-Agent names another is refused
	// (unknown_agent), so that no identity is stored that no config names.
	KnownAgent func(name string) bool
	// Per-connection deadlines; zero means the Default… constants. They
	// keep a client that sends one byte a second, or never reads, from
	// holding the daemon.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
}

// Server is the daemon's HTTP/JSON API on its Unix socket. It exposes a
// model.Service: agent routes act as the identity in AgentHeader, operator
// routes under /v1/operator/.
type Server struct {
	svc model.Service
	o   ServerOptions
	log *slog.Logger
	mux *http.ServeMux
	hs  *http.Server

	refusals *refusalBudget

	connMu  sync.Mutex
	conns   map[*peerConn]struct{} // accepted, not yet closed
	closing bool

	// down ends with Shutdown: long polls stop waiting on it.
	down     context.Context
	downStop context.CancelFunc
	// facades, inFlight and lastActive are what the daemon reads to tell
	// whether it is idle (daemon.go).
	facades    facadeSet
	inFlight   atomic.Int64
	lastActive atomic.Int64 // unix nanoseconds

	// gateMu guards resume (non-nil while Pause holds requests; Resume
	// closes it) and held, the requests waiting on it (admit).
	gateMu sync.Mutex
	resume chan struct{}
	held   int
}

// shutdownCtx is canceled when Shutdown begins.
func (s *Server) shutdownCtx() context.Context { return s.down }

// NewServer returns a server exposing svc. Call Serve to run it.
func NewServer(svc model.Service, o ServerOptions) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.UID == 0 {
		o.UID = os.Getuid()
	}
	if o.PeerCred == nil {
		o.PeerCred = PeerCred
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxAnswer <= 0 {
		o.MaxAnswer = DefaultMaxAnswer
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&o.ReadTimeout, DefaultReadTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)

	if o.RefusalBurst <= 0 {
		o.RefusalBurst = RefusalBurst
	}
	def(&o.RefusalEvery, RefusalEvery)

	s := &Server{svc: svc, o: o, log: o.Logger, mux: http.NewServeMux(), conns: map[*peerConn]struct{}{},
		refusals: newRefusalBudget(o.RefusalBurst, o.RefusalEvery, o.Clock)}
	s.down, s.downStop = context.WithCancel(context.Background())
	s.lastActive.Store(time.Now().UnixNano())
	s.routes()
	s.hs = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
		ConnState: func(c net.Conn, st http.ConnState) {
			if pc, ok := c.(*peerConn); ok && (st == http.StateClosed || st == http.StateHijacked) {
				s.connMu.Lock()
				delete(s.conns, pc)
				s.connMu.Unlock()
			}
		},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peerConn); ok {
				return context.WithValue(ctx, peerKey{}, peer{uid: pc.uid, pid: pc.pid, start: pc.start, topLevel: new(atomic.Bool), pidfd: pc.pidfd})
			}
			return ctx
		},
	}
	return s
}

// Serve accepts connections on ln until Shutdown. Every accepted
// connection's peer uid is checked before any HTTP is read: a mismatch, or
// credentials that cannot be read, closes the connection, calls OnRefused,
// and Serve goes on. Serve returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.hs.Serve(&peerListener{Listener: ln, s: s})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, closes the listener and idle connections, and
// waits for in-flight requests to finish. If ctx ends first, it closes every
// remaining connection and returns ctx's error. It may be called more than
// once.
//
// Connections on which nothing has been read yet are closed at once: a
// client's connection pool dials ahead, and net/http would otherwise wait up
// to 5 s for such a connection's first request. A request whose first
// bytes are still unread fails as if it had come after the listener closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.downStop()
	s.connMu.Lock()
	s.closing = true
	for c := range s.conns {
		if !c.read.Load() {
			_ = c.Close()
		}
	}
	s.connMu.Unlock()
	err := s.hs.Shutdown(ctx)
	if err != nil {
		_ = s.hs.Close()
	}
	return err
}

// ServeHTTP serves one API request; tests may call it directly.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(APIHeader, apiVersionText)
	w.Header().Set(VersionHeader, s.o.Version)
	if err := checkAPIHeader(r.Header); err != nil {
		s.writeError(w, r, err)
		return
	}
	end, ok := s.admit(r)
	if !ok {
		s.writeError(w, r, &model.Error{Code: model.CodeDaemonUnavailable,
			Message: "the relay daemon stopped before it served this request; nothing was done",
			Hint:    "send it again: a facade starts a new daemon (or start one with `relay daemon`)"})
		return
	}
	defer end()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("api handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			s.writeError(w, r, model.Errorf(model.CodeInternal, "internal error"))
		}
	}()
	// ServeMux answers an unclean path with a redirect, which is not
	// this API's one error shape: refuse it here instead.
	if p := r.URL.EscapedPath(); p != cleanPath(p) {
		s.writeError(w, r, model.Errorf(model.CodeNotFound, "no API route %s %s (the path is not clean)", r.Method, p).
			WithHint("the socket API's routes are under /v1/"))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// checkAPIHeader refuses a request made for another version of the
// socket API, before anything of it is read or done. A request without
// the header (curl, a script) is taken as this version's: its routes are.
func checkAPIHeader(h http.Header) error {
	vs := h.Values(APIHeader)
	if len(vs) == 0 || (len(vs) == 1 && vs[0] == apiVersionText) {
		return nil
	}
	return &model.Error{Code: model.CodeDaemonUnavailable,
		Message: fmt.Sprintf("this relay daemon speaks socket API %d; the request was made for %s; nothing was done",
			APIVersion, model.Clip(strings.Join(vs, ", "), 64)),
		Hint: "stop this daemon with the relay that started it (`relay daemon stop`) or by its pid, then start the relay you run"}
}

// cleanPath is net/http's cleanPath: path.Clean, keeping a trailing
// slash.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// peer is the verified peer of a connection; start is its process's start
// time as the connection was accepted (procStart), against pid reuse.
type peer struct {
	uid, pid int
	start    string
	// topLevel, shared by the connection's requests, is set once its
	// process was placed outside every task: a live process stays there
	// (its pid namespace never changes), so later requests check only
	// that it is still the one that connected.
	topLevel *atomic.Bool
	// pidfd names the peer's process (nil: none, see openPidfd); the
	// connection owns it.
	pidfd *os.File
}

// same reports whether the peer's process is still the one that
// connected, not one that took its pid over. The pidfd, opened before the
// start time was read, tells it with one poll: a process alive now held
// its pid since then. Without one, the start time is read again.
func (p peer) same() bool {
	if p.pid <= 0 || p.start == "" {
		return false
	}
	if p.pidfd != nil {
		if alive, ok := pidfdAlive(p.pidfd); ok {
			return alive
		}
	}
	return procStart(p.pid) == p.start
}

type peerKey struct{}

// PeerFromContext returns the SO_PEERCRED credentials of the connection a
// request arrived on (ok is false outside the socket server).
func PeerFromContext(ctx context.Context) (uid, pid int, ok bool) {
	p, ok := ctx.Value(peerKey{}).(peer)
	return p.uid, p.pid, ok
}

// peerListener checks each accepted connection's peer uid.
type peerListener struct {
	net.Listener
	s *Server
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := l.s.o.PeerCred(c)
		if err == nil && uid == l.s.o.UID {
			pc := &peerConn{Conn: c, uid: uid, pid: pid}
			if l.s.o.TaskOf != nil {
				// The pidfd first: the start time read after it is its
				// process's while that process lives (peer.same).
				pc.pidfd = openPidfd(pid)
				pc.start = procStart(pid)
			}
			l.s.connMu.Lock()
			closing := l.s.closing
			if !closing {
				l.s.conns[pc] = struct{}{}
			}
			l.s.connMu.Unlock()
			if closing {
				_ = c.Close()
				continue
			}
			return pc, nil
		}
		_ = c.Close()
		if err != nil {
			uid, pid = -1, -1
		}
		l.s.log.Warn("refused a socket connection", "peer_uid", uid, "peer_pid", pid, "want_uid", l.s.o.UID, "err", err)
		if l.s.o.OnRefused != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			l.s.o.OnRefused(ctx, uid, pid)
			cancel()
		}
	}
}

// peerConn is an accepted connection whose peer passed the uid check.
type peerConn struct {
	net.Conn
	uid, pid int
	start    string      // the peer's start time at accept (with TaskOf only)
	pidfd    *os.File    // the peer's process (with TaskOf only; nil: none)
	read     atomic.Bool // a byte was read: a request has begun
}

// Close closes the connection and the peer's pidfd. A request still
// being served that polls the pidfd meanwhile holds it (os.File), and
// then finds it closed: its peer can no longer be placed.
func (c *peerConn) Close() error {
	err := c.Conn.Close()
	if c.pidfd != nil {
		_ = c.pidfd.Close()
	}
	return err
}

func (c *peerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.read.Load() {
		c.read.Store(true)
	}
	return n, err
}

// CloseWrite keeps net/http's half-close working through the wrapper.
func (c *peerConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// handlerFunc handles one route; caller is the AgentHeader value on agent
// routes and "" elsewhere. A nil error sends v as JSON with status 200.
type handlerFunc func(w http.ResponseWriter, r *http.Request, caller string) (any, error)

// longAgentRoute registers an operator route that runs an agent for up
// to its ?timeout (run's own default when absent: budget), such as a probe
// or a verification. Such a run may legitimately outlast WriteTimeout, so
// the response's write deadline is stretched by the run's bound.
func longAgentRoute[T any](s *Server, pattern string, budget time.Duration, run func(ctx context.Context, name string, timeout time.Duration) (T, error)) {
	s.route(pattern, false, []string{"timeout"}, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		timeout, err := queryDuration(r.URL.Query(), "timeout")
		if err != nil {
			return nil, err
		}
		if err := DecodeEmpty(r.Body, s.o.MaxBody); err != nil {
			return nil, err
		}
		bound := budget
		if timeout != 0 {
			bound = timeout
		}
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(bound + s.o.WriteTimeout))
		return run(r.Context(), r.PathValue("name"), timeout)
	})
}

// route registers a handler; agent routes require AgentHeader; query
// lists the query parameters the route accepts (any other is refused).
func (s *Server) route(pattern string, agent bool, query []string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		caller := ""
		if agent {
			caller = r.Header.Get(AgentHeader)
			if n := len(r.Header.Values(AgentHeader)); n > 1 {
				// One identity, once: neither the first nor the last wins.
				s.writeError(w, r, model.InvalidArgs("the %s header is given %d times; a request acts as one agent", AgentHeader, n))
				return
			}
			if caller == "" {
				s.writeError(w, r, model.InvalidArgs("the %s header (the calling agent's identity) is required on %s", AgentHeader, r.URL.Path))
				return
			}
			if caller == model.RelayAgent {
				s.writeError(w, r, model.InvalidArgs("%q is the relay itself; no agent may act as it", caller))
				return
			}
			// An identity is stored with everything the caller does: it
			// must be an agent name, never arbitrary text.
			if !spec.ValidAgentName(caller) {
				s.writeError(w, r, model.InvalidArgs("the %s header %q is not an agent name (1–64 characters of [a-z0-9_-])", AgentHeader, model.Clip(caller, 64)))
				return
			}
			if s.o.KnownAgent != nil && !s.o.KnownAgent(caller) {
				s.writeError(w, r, model.Errorf(model.CodeUnknownAgent, "the %s header names %q, which is no agent of this relay", AgentHeader, caller).
					WithHint("run `relay agents` for the known agents; a custom agent needs an [agents."+caller+"] table in config.toml"))
				return
			}
		}
		if err := checkQuery(r.URL.Query(), query); err != nil {
			s.writeError(w, r, err)
			return
		}
		switch {
		case agent:
			inside, err := s.place(r.Context(), caller)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), insideKey{}, inside))
		case strings.HasPrefix(r.URL.Path, "/v1/operator/"):
			// The operator is the user, never an agent: a process inside a
			// task (or one that cannot be placed while tasks run) may not
			// cancel, verify or stop anything.
			if err := s.outsideTasks(r.Context()); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		v, err := h(w, r, caller)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, r, http.StatusOK, v)
	})
}

// routes registers every route of the API: the version, the agent routes
// (which act as the AgentHeader identity) and the operator routes under
// /v1/operator/.
func (s *Server) routes() {
	s.mux.HandleFunc("/", s.handleUnknown)
	s.route("GET /v1/version", false, nil, func(http.ResponseWriter, *http.Request, string) (any, error) {
		return VersionInfo{Version: s.o.Version, API: APIVersion}, nil
	})
	s.messageRoutes()
	s.taskRoutes()
	s.agentRoutes()
	s.operatorTaskRoutes()
	s.operatorRoutes()
}

// messageRoutes registers the agent routes of passive messages.
func (s *Server) messageRoutes() {
	s.route("POST /v1/messages", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		req, err := DecodeSendRequest(r.Body, s.o.MaxBody)
		if err != nil {
			return nil, err
		}
		req.ParentTaskID = s.insideTask(r.Context())
		return s.svc.SendMessage(r.Context(), caller, req)
	})
	// POST, not GET: reading the inbox marks messages read, and Go's HTTP
	// client silently replays a GET whose reused connection dropped, which
	// would mark a second page read that nobody received.
	s.route("POST /v1/inbox", true, []string{"unread_only", "limit"}, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		q := r.URL.Query()
		unread, err := queryBool(q, "unread_only", true)
		if err != nil {
			return nil, err
		}
		limit, err := queryLimit(q)
		if err != nil {
			return nil, err
		}
		in, err := s.svc.CheckInbox(r.Context(), caller, unread, limit)
		in.Messages = nonNil(in.Messages)
		return in, err
	})
	s.route("POST /v1/inbox/ack", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		ids, err := DecodeAckRequest(r.Body, s.o.MaxBody)
		if err != nil {
			return nil, err
		}
		return s.svc.AckMessages(r.Context(), caller, ids)
	})
}

// taskRoutes registers the agent routes of tasks.
func (s *Server) taskRoutes() {
	s.route("POST /v1/tasks", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		req, err := DecodeSubmitRequest(r.Body, s.o.MaxBody)
		if err != nil {
			return nil, err
		}
		req.ParentTaskID = s.insideTask(r.Context())
		return s.svc.SubmitTask(r.Context(), caller, req)
	})
	s.route("GET /v1/tasks/{id}", true, []string{"wait"}, s.handleGetTask)
	s.route("GET /v1/tasks", true, []string{"state", "limit", "before"}, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		q := r.URL.Query()
		limit, err := queryLimit(q)
		if err != nil {
			return nil, err
		}
		ts, err := s.svc.ListTasks(r.Context(), caller, model.State(q.Get("state")), limit, q.Get("before"))
		return TaskList{Tasks: nonNil(ts)}, err
	})
	s.route("POST /v1/tasks/{id}/cancel", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		if err := DecodeEmpty(r.Body, s.o.MaxBody); err != nil {
			return nil, err
		}
		return s.svc.CancelTask(r.Context(), caller, r.PathValue("id"))
	})
	s.route("POST /v1/tasks/{id}/mcp-task/{event}", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		if err := DecodeEmpty(r.Body, s.o.MaxBody); err != nil {
			return nil, err
		}
		return struct{}{}, s.svc.MCPTaskEvent(r.Context(), caller, r.PathValue("id"), model.MCPTaskEvent(r.PathValue("event")))
	})
}

// agentRoutes registers the agent routes of the registry and of
// connections.
func (s *Server) agentRoutes() {
	s.route("GET /v1/agents", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		as, err := s.svc.ListAgents(r.Context())
		return AgentList{Agents: nonNil(as)}, err
	})
	s.route("POST /v1/connections", true, nil, func(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
		c, err := DecodeConn(r.Body, s.o.MaxBody)
		if err != nil {
			return nil, err
		}
		switch c.Agent {
		case "":
			c.Agent = caller
		case caller:
		default:
			return nil, model.InvalidArgs("conn agent %q is not the caller %q", c.Agent, caller)
		}
		// The kernel's word on who connected beats the body's.
		if uid, pid, ok := PeerFromContext(r.Context()); ok {
			c.UID, c.PID = uid, pid
		}
		if err := s.svc.Connected(r.Context(), c); err != nil {
			return nil, err
		}
		s.facades.add(c)
		return struct{}{}, nil
	})
}

// operatorTaskRoutes registers the operator routes of tasks.
func (s *Server) operatorTaskRoutes() {
	s.route("GET /v1/operator/tasks", false, []string{"state", "agent", "caller", "target", "limit", "before"}, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		q := r.URL.Query()
		limit, err := queryLimit(q)
		if err != nil {
			return nil, err
		}
		ts, err := s.svc.Tasks(r.Context(), model.TaskFilter{
			State: model.State(q.Get("state")), Agent: q.Get("agent"), Caller: q.Get("caller"),
			Target: q.Get("target"), Limit: limit, Before: q.Get("before"),
		})
		return TaskList{Tasks: nonNil(ts)}, err
	})
	s.route("GET /v1/operator/tasks/{id}", false, nil, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		return s.svc.ShowTask(r.Context(), r.PathValue("id"))
	})
	s.route("POST /v1/operator/tasks/{id}/cancel", false, nil, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		if err := DecodeEmpty(r.Body, s.o.MaxBody); err != nil {
			return nil, err
		}
		return s.svc.CancelTaskAsOperator(r.Context(), r.PathValue("id"))
	})
}

// operatorRoutes registers the other operator routes: messages, agents
// (list, probe, verify), the event watch and the audit check.
func (s *Server) operatorRoutes() {
	s.route("GET /v1/operator/messages", false, []string{"to", "from", "unread_only", "limit", "before"}, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		q := r.URL.Query()
		limit, err := queryLimit(q)
		if err != nil {
			return nil, err
		}
		unread, err := queryBool(q, "unread_only", false)
		if err != nil {
			return nil, err
		}
		ms, err := s.svc.Messages(r.Context(), model.MessageFilter{
			To: q.Get("to"), From: q.Get("from"), UnreadOnly: unread, Limit: limit, Before: q.Get("before"),
		})
		return MessageList{Messages: nonNil(ms)}, err
	})
	s.route("GET /v1/operator/shares", false, []string{"to"}, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		sh, err := s.svc.InboxShares(r.Context(), r.URL.Query().Get("to"))
		return ShareList{OverShare: nonNil(sh)}, err
	})
	s.route("GET /v1/operator/agents", false, nil, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		as, err := s.svc.Agents(r.Context())
		return AgentList{Agents: nonNil(as)}, err
	})
	probeBudget := s.o.ProbeTimeout
	if probeBudget <= 0 {
		probeBudget = defaultProbeTimeout
	}
	longAgentRoute(s, "POST /v1/operator/agents/{name}/probe", probeBudget, s.svc.ProbeAgent)
	longAgentRoute(s, "POST /v1/operator/agents/{name}/verify", defaultVerifyTimeout, s.svc.VerifyAgent)
	s.route("GET /v1/operator/events", false, []string{"task", "after", "wait"}, s.handleEvents)
	s.route("GET /v1/operator/audit/verify", false, nil, func(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
		return s.svc.VerifyAudit(r.Context())
	})
}

// handleEvents is GET /v1/operator/events?task=ID&after=SEQ&wait=20s, the
// long poll of `relay tasks watch`: the task events after the cursor
// (after absent: from now on, with a task its history so far), answered
// as soon as there is one, or with none and the cursor when wait passes.
// The wait is capped below the connection's deadlines (4/5 of the shorter),
// and ends early, answering what there is, when the server shuts down,
// so that a follower never holds a stopping daemon.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, _ string) (any, error) {
	q := r.URL.Query()
	f := model.EventFilter{TaskID: q.Get("task"), After: model.AfterNow}
	if q.Has("after") {
		n, err := strconv.ParseInt(q.Get("after"), 10, 64)
		if err != nil || n < 0 {
			return nil, model.InvalidArgs("after %q is not a cursor (a non-negative integer from a previous answer)", model.Clip(q.Get("after"), 64))
		}
		f.After = n
	}
	wait, err := queryDuration(q, "wait")
	if err != nil {
		return nil, err
	}
	if wait > model.MaxWatchWait {
		return nil, model.InvalidArgs("wait %s is over the bound of %s", wait, model.MaxWatchWait)
	}
	// Past the read deadline net/http's background read fails and ends
	// the request's context; past the write deadline the answer is lost.
	f.Wait = min(wait, min(s.o.ReadTimeout, s.o.WriteTimeout)*4/5)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.shutdownCtx(), cancel)
	defer stop()
	return s.svc.WatchEvents(ctx, f)
}

// outsideTasks refuses (identity_mismatch) an operator request whose peer
// runs inside a task, or cannot be placed while tasks run.
func (s *Server) outsideTasks(ctx context.Context) error {
	p, ok := ctx.Value(peerKey{}).(peer)
	if s.o.TaskOf == nil || !ok {
		return nil
	}
	pid := p.pid
	if !p.same() {
		pid = 0
	}
	id, _, err := s.o.TaskOf(pid)
	switch {
	case err != nil:
		return model.Errorf(model.CodeIdentityMismatch, "the relay cannot tell whether this client runs inside a task (%s) while tasks run: operator requests are refused", err).
			WithHint("run relay's operator commands from your own shell, outside any container")
	case id != "":
		if s.o.OnIdentityRefused != nil {
			s.o.OnIdentityRefused(ctx, "operator", id, "", p.pid, "an operator request from inside task "+id)
		}
		return model.Errorf(model.CodeIdentityMismatch, "this client runs inside task %s: operator requests come from the user, never from an agent", id).
			WithHint("run relay's operator commands from your own shell")
	}
	return nil
}

// insideKey is the context key of the task an agent request's peer acts
// inside (place), "" for a top-level caller.
type insideKey struct{}

// insideTask returns the running task inside which the request's peer
// acts, as place found it, or "".
func (s *Server) insideTask(ctx context.Context) string {
	id, _ := ctx.Value(insideKey{}).(string)
	return id
}

// place returns the running task inside which the request's peer acts
// (ServerOptions.TaskOf), or "", and refuses (identity_mismatch) a peer
// inside a task that claims another identity than the task's target, and
// one that cannot be placed while tasks run. The peer's pid is the
// kernel's, read when the connection was accepted; its process must
// still be the one that was there then (the same start time, before and
// after the look-up): a peer gone or replaced cannot be placed, so that
// a pid another process took over never inherits, nor sheds, a task.
func (s *Server) place(ctx context.Context, caller string) (string, error) {
	p, ok := ctx.Value(peerKey{}).(peer)
	if s.o.TaskOf == nil || !ok {
		return "", nil
	}
	pid := p.pid
	if !p.same() {
		pid = 0
	} else if p.topLevel != nil && p.topLevel.Load() {
		return "", nil
	}
	id, target, err := s.o.TaskOf(pid)
	if err == nil && pid != 0 && !p.same() {
		id, target, err = "", "", errors.New("the process that connected is gone")
	}
	refuse := func(why string, e *model.Error) (string, error) {
		if s.o.OnIdentityRefused != nil {
			s.o.OnIdentityRefused(ctx, caller, id, target, p.pid, why)
		}
		return "", e
	}
	switch {
	case err != nil:
		return refuse(err.Error(), model.Errorf(model.CodeIdentityMismatch,
			"the relay cannot tell whether this facade runs inside a task (%s) while tasks run: refused, so that no process sheds its task", err).
			WithHint("run the facade as a direct child of your agent's MCP client, outside any container; retry once no task runs"))
	case id != "" && caller != target:
		why := fmt.Sprintf("runs inside task %s, whose target is %s, and claimed %s", id, target, caller)
		return refuse(why, model.Errorf(model.CodeIdentityMismatch,
			"this facade runs inside task %s, whose agent is %s: it acts only as %s, not as %s", id, target, target, caller).
			WithHint("an agent inside a task speaks as itself: start `relay mcp --as "+target+"`"))
	}
	if id == "" && pid != 0 && p.topLevel != nil {
		p.topLevel.Store(true)
	}
	return id, nil
}

// handleGetTask is GET /v1/tasks/{id}?wait=30s: the task, at once, or with
// wait (at most model.MaxTaskWait) as soon as it is terminal or the wait
// has passed (model.AgentService.WaitTask). The connection's write
// deadline is moved past the wait for this request, and a server shutting
// down ends the wait at once, answering the task as it is.
func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request, caller string) (any, error) {
	wait, err := queryDuration(r.URL.Query(), "wait")
	if err != nil {
		return nil, err
	}
	if wait > model.MaxTaskWait {
		return nil, model.InvalidArgs("wait %s is over the bound of %s", wait, model.MaxTaskWait)
	}
	if wait == 0 {
		return s.svc.GetTask(r.Context(), caller, r.PathValue("id"))
	}
	// Past the write deadline the answer would be lost. (The read
	// deadline does not end the wait: net/http clears it once a request
	// without a body is read, for its background read.)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + s.o.WriteTimeout))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.shutdownCtx(), cancel)
	defer stop()
	return s.svc.WaitTask(ctx, caller, r.PathValue("id"), wait)
}

// TaskList is the body of the task listing routes.
type TaskList struct {
	Tasks []model.Task `json:"tasks"`
}

// MessageList is the body of GET /v1/operator/messages.
type MessageList struct {
	Messages []model.Message `json:"messages"`
}

// ShareList is the body of GET /v1/operator/shares.
type ShareList struct {
	OverShare []model.InboxShare `json:"over_share"`
}

// AgentList is the body of the agent listing routes.
type AgentList struct {
	Agents []model.AgentInfo `json:"agents"`
}

// AckRequest is the body of POST /v1/inbox/ack.
type AckRequest struct {
	MessageIDs []string `json:"message_ids"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// handleUnknown answers every request no route matches: not_found for an
// unknown path, invalid_args (status 405) for a known path with another
// method.
func (s *Server) handleUnknown(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := s.mux.Handler(r2); p != "" && p != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		e := model.InvalidArgs("method %s is not allowed on %s (allowed: %v)", r.Method, r.URL.Path, allow)
		s.writeErrorStatus(w, r, http.StatusMethodNotAllowed, e)
		return
	}
	s.writeError(w, r, model.Errorf(model.CodeNotFound, "no API route %s %s", r.Method, r.URL.Path).
		WithHint("the socket API's routes are under /v1/; see GET /v1/version"))
}

// writeError sends err as {"code","message","hint"} with the code's status.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeErrorStatus(w, r, Status(model.Public(err).Code), err)
}

func (s *Server) writeErrorStatus(w http.ResponseWriter, r *http.Request, status int, err error) {
	pub := spec.PublicError(err)
	// Log once, here, at the top: the full internal error for failures of
	// the daemon, a debug line for refused requests. Every logged value is
	// bounded (pub is; the path and the internal error are clipped), and
	// refused requests are logged within a budget per agent.
	path := model.Clip(r.URL.Path, 256)
	if status >= 500 {
		s.log.Error("api request failed", "method", r.Method, "path", path, "code", pub.Code,
			"err", model.Clip(err.Error(), 2*model.MaxErrorText))
	} else {
		s.logRefusal(r, path, pub, err)
	}
	s.writeJSON(w, r, status, pub)
}

// logRefusal logs a refused request within its agent's budget: past it, one
// line says that the agent's refusals are no longer logged, and the next
// logged one says how many were not.
func (s *Server) logRefusal(r *http.Request, path string, pub *model.Error, err error) {
	agent := r.Header.Get(AgentHeader)
	switch {
	case agent == "":
		agent = "(operator)"
	case !spec.ValidAgentName(agent):
		agent = "(invalid name)"
	}
	ok, suppressed, first := s.refusals.take(agent)
	if !ok {
		if first {
			s.log.Warn("api refusals suppressed: this agent's refused requests are not logged for a while",
				"agent", agent, "every", s.o.RefusalEvery)
		}
		return
	}
	if suppressed > 0 {
		s.log.Warn("api refusals suppressed: resumed logging", "agent", agent, "suppressed", suppressed)
	}
	s.log.Debug("api request refused", "method", r.Method, "path", path, "agent", agent,
		"code", pub.Code, "err", model.Clip(err.Error(), model.MaxErrorText))
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("api response encoding failed", "method", r.Method, "path", r.URL.Path, "err", err)
		status = http.StatusInternalServerError
		b, _ = json.Marshal(model.Public(err))
	}
	if len(b) >= s.o.MaxAnswer {
		// Never reached by a listing (pages stop at model.AnswerBytes);
		// an answer the client could not read whole is refused instead.
		err := model.Errorf(model.CodeInternal, "the answer to %s %s would be %d bytes, over the socket API's bound of %d",
			r.Method, r.URL.Path, len(b), s.o.MaxAnswer)
		s.log.Error("api answer too large", "method", r.Method, "path", r.URL.Path, "bytes", len(b), "bound", s.o.MaxAnswer)
		status = http.StatusInternalServerError
		b, _ = json.Marshal(model.Public(err).WithHint(spec.Hint(model.CodeInternal)))
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// checkQuery refuses unknown and repeated query parameters.
func checkQuery(q url.Values, allowed []string) error {
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return model.InvalidArgs("unknown query parameter %q", k)
		}
		if len(vs) > 1 {
			return model.InvalidArgs("query parameter %q is given %d times", k, len(vs))
		}
	}
	return nil
}

// queryLimit parses limit: absent means 0 (the service's default); it
// must be a non-negative integer.
func queryLimit(q url.Values) (int, error) {
	if !q.Has("limit") {
		return 0, nil
	}
	s := q.Get("limit")
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, model.InvalidArgs("limit %q is not an integer", s)
	}
	if n < 0 {
		return 0, model.InvalidArgs("limit %d is negative", n)
	}
	return n, nil
}

func queryBool(q url.Values, name string, def bool) (bool, error) {
	if !q.Has(name) {
		return def, nil
	}
	s := q.Get(name)
	switch s {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, model.InvalidArgs("%s %q is not true or false", name, s)
}

// queryDuration parses a Go duration such as 60s; absent means 0.
func queryDuration(q url.Values, name string) (time.Duration, error) {
	if !q.Has(name) {
		return 0, nil
	}
	s := q.Get(name)
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, model.InvalidArgs("%s %q is not a duration such as 60s", name, s)
	}
	if d < 0 {
		return 0, model.InvalidArgs("%s %s is negative", name, fmt.Sprint(d))
	}
	return d, nil
}
