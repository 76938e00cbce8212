package socketapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// Client defaults.
const (
	DefaultStartWait     = 10 * time.Second
	DefaultClientTimeout = 30 * time.Second
	// clientMaxResponse bounds a response body the client reads.
	clientMaxResponse = 64 << 20
)

// ClientOptions configures NewClient.
type ClientOptions struct {
	// Agent is the identity sent in AgentHeader on agent calls. Operator
	// clients leave it empty (agent calls are then refused by the daemon).
	Agent string
	// Autostart is called when no daemon answers (no socket, or connection
	// refused); nil means no autostart. It should start the daemon in the
	// background and return; the client then waits for the socket.
	Autostart func(ctx context.Context) error
	// StartWait is how long to wait for an autostarted daemon to answer;
	// 0 means DefaultStartWait.
	StartWait time.Duration
	// BeforeDial, when set, is called before every new connection to the
	// daemon, autostart included; its error refuses the call (a
	// *model.Error as it is, anything else as daemon_unavailable). The
	// relay checks its home's owner and mode here.
	BeforeDial func() error
	// PeerCred returns a connection's peer credentials; nil means PeerCred
	// (SO_PEERCRED). Whatever it returns, a daemon running as another uid
	// than the client's effective uid is refused before a byte is written
	// to it. Tests inject their own.
	PeerCred func(net.Conn) (uid, pid int, err error)
	// Timeout bounds each call, including any wait for an autostarted
	// daemon (a probe gets its own timeout on top); 0 means
	// DefaultClientTimeout, negative means no bound beyond ctx.
	Timeout time.Duration
}

// Client is a model.Service that talks to the daemon over its Unix socket.
// Errors keep their code, message and hint across the wire, so
// model.ErrorCode works as with the in-process service. A Client is safe
// for concurrent use and keeps its connections open between calls.
type Client struct {
	sock string
	o    ClientOptions
	pool clientPool

	startMu sync.Mutex
	start   *clientStart
}

var _ model.Service = (*Client)(nil)

// clientStart is one autostart attempt, shared by every call that finds no
// daemon while it runs.
type clientStart struct {
	done     chan struct{} // closed when Autostart returned
	err      error         // Autostart's error, valid after done
	deadline time.Time     // when waiting for the socket gives up
	answered atomic.Bool   // a dial succeeded after this attempt
}

// NewClient returns a client of the daemon listening on sockPath.
func NewClient(sockPath string, o ClientOptions) *Client {
	if o.StartWait <= 0 {
		o.StartWait = DefaultStartWait
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultClientTimeout
	}
	if o.PeerCred == nil {
		o.PeerCred = PeerCred
	}
	return &Client{sock: sockPath, o: o}
}

// Close closes the client's idle connections. The client stays usable.
func (c *Client) Close() { c.pool.closeAll() }

// Version returns the daemon's version, and checks its API version.
// Calls need not ask first: every answer carries the daemon's API version
// (APIHeader), which the client checks.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v VersionInfo
	if err := c.roundTrip(ctx, http.MethodGet, "/v1/version", nil, "", nil, &v, 0); err != nil {
		return "", err
	}
	if v.API != APIVersion {
		return "", c.apiRefusal(strconv.Itoa(v.API), v.Version)
	}
	return v.Version, nil
}

// apiRefusal is the error of an answer from a daemon of another socket
// API version.
func (c *Client) apiRefusal(api, version string) error {
	return &model.Error{Code: model.CodeDaemonUnavailable,
		Message: fmt.Sprintf("the daemon on %s speaks socket API %s; this relay speaks %d (version %q)", c.sock, model.Clip(api, 64), APIVersion, model.Clip(version, 64)),
		Hint:    fmt.Sprintf("stop that daemon and start this relay's: `relay daemon --home %s`", filepath.Dir(c.sock))}
}

func (c *Client) unavailable(msg string, err error) *model.Error {
	return &model.Error{Code: model.CodeDaemonUnavailable, Message: msg, Err: err,
		Hint: fmt.Sprintf("start it with `relay daemon --home %s`", filepath.Dir(c.sock))}
}

// outcomeUnknown is the error of a request that changes something, sent
// whole, whose answer was lost: the daemon may have carried it out, so it
// is not daemon_unavailable (which promises that nothing was done).
func (c *Client) outcomeUnknown(ctx context.Context, method, path string, err error) *model.Error {
	why := "the connection closed before the answer came"
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		why = "the call was canceled before the answer came"
	case clientTimedOut(ctx, err):
		why = "no answer came within the call's timeout"
	}
	return &model.Error{Code: model.CodeOutcomeUnknown, Err: err,
		Message: fmt.Sprintf("the request (%s %s) reached the relay daemon on %s, but %s: it may have been carried out", method, path, c.sock, why),
		Hint:    spec.Hint(model.CodeOutcomeUnknown)}
}

// clientTimedOut reports whether a call failed for its deadline: the
// connection's deadline is the context's and may pass first.
func clientTimedOut(ctx context.Context, err error) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// clientNoDaemon reports whether a dial error means nothing listens.
func clientNoDaemon(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// dial connects to the socket, autostarting the daemon if configured.
func (c *Client) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if c.o.BeforeDial != nil {
		if err := c.o.BeforeDial(); err != nil {
			var me *model.Error
			if errors.As(err, &me) {
				return nil, me
			}
			return nil, c.unavailable(fmt.Sprintf("the relay home of %s cannot be used: %v", c.sock, err), err)
		}
	}
	conn, err := c.connect(ctx)
	if err == nil {
		return conn, nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		return nil, me
	}
	if ctx.Err() != nil {
		return nil, c.unavailable(fmt.Sprintf("the call ended before it reached the relay daemon on %s (%v); nothing was sent", c.sock, ctx.Err()), err)
	}
	if !clientNoDaemon(err) {
		return nil, c.unavailable(fmt.Sprintf("cannot connect to the relay daemon on %s", c.sock), err)
	}
	if c.o.Autostart == nil {
		return nil, c.unavailable(fmt.Sprintf("no relay daemon answers on %s", c.sock), err)
	}
	return c.autostartDial(ctx)
}

// connect dials the socket and checks who serves it: the daemon must run
// as the client's effective uid, or anyone able to put a socket at this
// path would read every request and forge every answer. A refusal is a
// *model.Error; other errors are the dial's.
func (c *Client) connect(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.sock)
	if err != nil {
		return nil, err
	}
	uid, pid, err := c.o.PeerCred(conn)
	if err != nil {
		_ = conn.Close()
		return nil, &model.Error{Code: model.CodeDaemonUnavailable, Err: err,
			Message: fmt.Sprintf("cannot tell who serves %s (%v); the relay refuses to talk to it", c.sock, err),
			Hint:    "the relay needs SO_PEERCRED (Linux) to check that its daemon runs as you"}
	}
	if me := os.Geteuid(); uid != me {
		_ = conn.Close()
		return nil, &model.Error{Code: model.CodeDaemonUnavailable,
			Message: fmt.Sprintf("the socket %s is served by uid %d (pid %d), not by uid %d who runs this client; the relay refuses to talk to it (nothing was sent)", c.sock, uid, pid, me),
			Hint: fmt.Sprintf("another user's program listens in this relay home: stop using %s, and pass a --home only you can write "+
				"(the default is $XDG_STATE_HOME/hai-relay, else ~/.local/state/hai-relay)", filepath.Dir(c.sock))}
	}
	return conn, nil
}

// autostartDial joins (or begins) an autostart attempt, then dials with a
// short backoff until the attempt's deadline. Concurrent calls share one
// Autostart call; a failed attempt is not retried by this client (its
// error is returned at once), while a new one may begin after a daemon
// that had come up went away again.
func (c *Client) autostartDial(ctx context.Context) (net.Conn, error) {
	c.startMu.Lock()
	a := c.start
	begin := a == nil || a.answered.Load()
	if begin {
		a = &clientStart{done: make(chan struct{}), deadline: time.Now().Add(c.o.StartWait)}
		c.start = a
	}
	c.startMu.Unlock()

	if begin {
		// The daemon outlives this call: its start must not be cut short
		// by the caller's cancellation, only by StartWait.
		sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), a.deadline)
		a.err = c.o.Autostart(sctx)
		cancel()
		close(a.done)
	} else {
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, c.unavailable("gave up waiting for the relay daemon to start", ctx.Err())
		}
	}
	if me := (*model.Error)(nil); errors.As(a.err, &me) {
		return nil, me // a refusal of Autostart's own, with its hint
	}
	if a.err != nil {
		return nil, c.unavailable(fmt.Sprintf("no relay daemon answers on %s, and starting one failed: %v", c.sock, a.err), a.err)
	}

	backoff := 5 * time.Millisecond
	for {
		conn, err := c.connect(ctx)
		if err == nil {
			a.answered.Store(true)
			return conn, nil
		}
		var me *model.Error
		if errors.As(err, &me) {
			return nil, me
		}
		if !clientNoDaemon(err) {
			return nil, c.unavailable(fmt.Sprintf("cannot connect to the relay daemon on %s", c.sock), err)
		}
		wait := time.Until(a.deadline)
		if wait <= 0 {
			return nil, c.unavailable(fmt.Sprintf("a relay daemon was started but did not answer on %s within %s", c.sock, c.o.StartWait), err)
		}
		t := time.NewTimer(min(backoff, wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, c.unavailable("gave up waiting for the relay daemon to start", ctx.Err())
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// call makes one operator request.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	return c.roundTrip(ctx, method, path, q, "", in, out, 0)
}

// roundTrip makes one request; extra lengthens the call's timeout.
func (c *Client) roundTrip(ctx context.Context, method, path string, q url.Values, agent string, in, out any, extra time.Duration) error {
	if c.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.Timeout+extra)
		defer cancel()
	}
	req := clientReq{method: method, target: path, agent: agent}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &model.Error{Code: model.CodeInvalidArgs, Message: "the request could not be encoded", Err: err}
		}
		req.body = b
	}
	if len(q) > 0 {
		req.target += "?" + q.Encode()
	}
	status, data, err := c.do(ctx, req, clientMaxResponse)
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return me
		}
		if am := (*apiMismatch)(nil); errors.As(err, &am) {
			return c.apiRefusal(am.api, am.version)
		}
		if errors.Is(err, errAnswerLost) && method != http.MethodGet {
			return c.outcomeUnknown(ctx, method, path, err)
		}
		if ctx.Err() != nil || clientTimedOut(ctx, err) {
			return c.unavailable(fmt.Sprintf("the relay daemon on %s did not answer in time; nothing was changed", c.sock), err)
		}
		return c.unavailable(fmt.Sprintf("lost the connection to the relay daemon on %s; nothing was changed", c.sock), err)
	}
	if status != http.StatusOK {
		return clientDecodeError(status, data)
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = bytes.TrimRight(data, "\n")
		return nil
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return &model.Error{Code: model.CodeInternal, Message: "the daemon's answer could not be decoded",
				Hint: spec.Hint(model.CodeInternal), Err: err}
		}
	}
	return nil
}

// clientDecodeError turns an error body back into the *model.Error the
// daemon's service returned.
func clientDecodeError(status int, data []byte) error {
	var e struct {
		Code    model.Code `json:"code"`
		Message string     `json:"message"`
		Hint    string     `json:"hint"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Code == "" {
		return &model.Error{Code: model.CodeInternal,
			Message: fmt.Sprintf("the daemon answered HTTP %d without an error body", status),
			Hint:    spec.Hint(model.CodeInternal), Err: err}
	}
	return &model.Error{Code: e.Code, Message: e.Message, Hint: e.Hint}
}

// clientPathArg refuses an empty path segment, which would change the route.
func clientPathArg(name, v string) (string, error) {
	if v == "" {
		return "", model.InvalidArgs("%s is required", name)
	}
	return url.PathEscape(v), nil
}

// clientTaskID is clientPathArg for a task id. One longer than
// model.MaxLookupIDBytes names no task the relay made (its ids are 28
// bytes): it is answered not_found here, as the daemon answers any id it
// never made, instead of sending a URL the socket's header bound would cut.
func clientTaskID(id string) (string, error) {
	if len(id) > model.MaxLookupIDBytes {
		return "", spec.Errorf(model.CodeNotFound, "no task %q: it is %d bytes, and no task id is longer than %d",
			model.Echo(id), len(id), model.MaxLookupIDBytes)
	}
	return clientPathArg("task_id", id)
}

func clientSet(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func clientSetLimit(q url.Values, n int) {
	if n != 0 {
		q.Set("limit", strconv.Itoa(n))
	}
}

// SendMessage implements model.AgentService. caller must be the client's
// Agent; the daemon takes the identity from the client.
func (c *Client) SendMessage(ctx context.Context, caller string, r model.SendRequest) (model.Message, error) {
	var m model.Message
	err := c.sendMessage(ctx, caller, r, &m)
	return m, err
}

// The agent calls below decode the daemon's answer into out: a typed value,
// or a *json.RawMessage, which gets the answer's bytes as they came. The
// …JSON methods return those bytes: the MCP server passes them on as the
// tool result (mcpserver.PassThrough), since the daemon's answers to these
// four calls are the tools' results byte for byte (server.go keeps them
// so).

// SendMessageJSON is SendMessage returning the daemon's answer, a
// model.Message, as the JSON it came as.
func (c *Client) SendMessageJSON(ctx context.Context, caller string, r model.SendRequest) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.sendMessage(ctx, caller, r, &raw)
	return raw, err
}

// CheckInboxJSON is CheckInbox returning the daemon's answer, a
// model.Inbox, as the JSON it came as.
func (c *Client) CheckInboxJSON(ctx context.Context, caller string, unreadOnly bool, limit int) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.checkInbox(ctx, caller, unreadOnly, limit, &raw)
	return raw, err
}

// GetTaskJSON is GetTask returning the daemon's answer, a model.Task, as
// the JSON it came as.
func (c *Client) GetTaskJSON(ctx context.Context, caller, id string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.getTask(ctx, caller, id, 0, &raw)
	return raw, err
}

// WaitTaskJSON is WaitTask returning the daemon's answer, a model.Task, as
// the JSON it came as.
func (c *Client) WaitTaskJSON(ctx context.Context, caller, id string, wait time.Duration) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.getTask(ctx, caller, id, wait, &raw)
	return raw, err
}

// ListTasksJSON is ListTasks returning the daemon's answer, a TaskList
// ({"tasks": [...]}), as the JSON it came as.
func (c *Client) ListTasksJSON(ctx context.Context, caller string, state model.State, limit int, before string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.listTasks(ctx, caller, state, limit, before, &raw)
	return raw, err
}

func (c *Client) sendMessage(ctx context.Context, caller string, r model.SendRequest, out any) error {
	if r.ParentTaskID != "" {
		return errParentFromClient()
	}
	return c.agentCall(ctx, caller, http.MethodPost, "/v1/messages", nil, r, out)
}

// errParentFromClient refuses a request that names the task it is made
// inside: the daemon finds that from the caller's process, and no client
// can claim it (the wire form has no such field).
func errParentFromClient() *model.Error {
	return model.Errorf(model.CodeInvalidArgs, "parent_task_id is not a client's to set: the daemon finds the task a caller acts inside from its process").
		WithHint("leave ParentTaskID empty; a facade started by a task's agent is inside that task by itself")
}

// CheckInbox implements model.AgentService.
func (c *Client) CheckInbox(ctx context.Context, caller string, unreadOnly bool, limit int) (model.Inbox, error) {
	var in model.Inbox
	err := c.checkInbox(ctx, caller, unreadOnly, limit, &in)
	return in, err
}

func (c *Client) checkInbox(ctx context.Context, caller string, unreadOnly bool, limit int, out any) error {
	q := url.Values{"unread_only": {strconv.FormatBool(unreadOnly)}}
	clientSetLimit(q, limit)
	return c.agentCall(ctx, caller, http.MethodPost, "/v1/inbox", q, nil, out)
}

// AckMessages implements model.AgentService.
func (c *Client) AckMessages(ctx context.Context, caller string, ids []string) (model.AckResult, error) {
	var res model.AckResult
	err := c.agentCall(ctx, caller, http.MethodPost, "/v1/inbox/ack", nil, AckRequest{MessageIDs: ids}, &res)
	return res, err
}

// SubmitTask implements model.AgentService.
func (c *Client) SubmitTask(ctx context.Context, caller string, r model.SubmitRequest) (model.Task, error) {
	if r.ParentTaskID != "" {
		return model.Task{}, errParentFromClient()
	}
	var t model.Task
	err := c.agentCall(ctx, caller, http.MethodPost, "/v1/tasks", nil, r, &t)
	return t, err
}

// GetTask implements model.AgentService.
func (c *Client) GetTask(ctx context.Context, caller, id string) (model.Task, error) {
	var t model.Task
	err := c.getTask(ctx, caller, id, 0, &t)
	return t, err
}

// WaitTask implements model.AgentService: one long request, GET
// /v1/tasks/ID?wait=…, that the daemon answers as soon as the task is
// terminal or the wait has passed. The call may take wait on top of the
// client's own timeout.
func (c *Client) WaitTask(ctx context.Context, caller, id string, wait time.Duration) (model.Task, error) {
	var t model.Task
	err := c.getTask(ctx, caller, id, wait, &t)
	return t, err
}

func (c *Client) getTask(ctx context.Context, caller, id string, wait time.Duration, out any) error {
	p, err := clientTaskID(id)
	if err != nil {
		return err
	}
	var q url.Values
	if wait != 0 {
		// Out of range is the daemon's to refuse, as it refuses any
		// client's; a negative wait is not sent as a duration it parses.
		q = url.Values{"wait": {wait.String()}}
	}
	return c.agentCallFor(ctx, caller, http.MethodGet, "/v1/tasks/"+p, q, nil, out, max(wait, 0))
}

// ListTasks implements model.AgentService.
func (c *Client) ListTasks(ctx context.Context, caller string, state model.State, limit int, before string) ([]model.Task, error) {
	var l TaskList
	err := c.listTasks(ctx, caller, state, limit, before, &l)
	return l.Tasks, err
}

func (c *Client) listTasks(ctx context.Context, caller string, state model.State, limit int, before string, out any) error {
	q := url.Values{}
	clientSet(q, "state", string(state))
	clientSet(q, "before", before)
	clientSetLimit(q, limit)
	return c.agentCall(ctx, caller, http.MethodGet, "/v1/tasks", q, nil, out)
}

// CancelTask implements model.AgentService.
func (c *Client) CancelTask(ctx context.Context, caller, id string) (model.Task, error) {
	p, err := clientTaskID(id)
	if err != nil {
		return model.Task{}, err
	}
	var t model.Task
	err = c.agentCall(ctx, caller, http.MethodPost, "/v1/tasks/"+p+"/cancel", nil, nil, &t)
	return t, err
}

// MCPTaskEvent implements model.AgentService.
func (c *Client) MCPTaskEvent(ctx context.Context, caller, id string, event model.MCPTaskEvent) error {
	p, err := clientTaskID(id)
	if err != nil {
		return err
	}
	if !slices.Contains(model.AllMCPTaskEvents(), event) {
		return model.Errorf(model.CodeInvalidArgs, "%q is not an MCP task event", model.Echo(string(event)))
	}
	return c.agentCall(ctx, caller, http.MethodPost, "/v1/tasks/"+p+"/mcp-task/"+string(event), nil, nil, nil)
}

// ListAgents implements model.AgentService.
func (c *Client) ListAgents(ctx context.Context) ([]model.AgentInfo, error) {
	var l AgentList
	err := c.agentCall(ctx, "", http.MethodGet, "/v1/agents", nil, nil, &l)
	return l.Agents, err
}

// Connected implements model.AgentService. The daemon replaces the uid and
// pid with the connection's SO_PEERCRED credentials.
func (c *Client) Connected(ctx context.Context, conn model.Conn) error {
	return c.agentCall(ctx, conn.Agent, http.MethodPost, "/v1/connections", nil, conn, nil)
}

// agentCall makes an agent call as caller, or as ClientOptions.Agent when
// caller is empty. A client made with an Agent refuses to act as anyone
// else: its identity is fixed when it is made, as the facade's is at
// launch. (A client without one, as in shared conformance tests, acts as
// whoever each call names.)
func (c *Client) agentCall(ctx context.Context, caller, method, path string, q url.Values, in, out any) error {
	return c.agentCallFor(ctx, caller, method, path, q, in, out, 0)
}

// agentCallFor is agentCall whose timeout is lengthened by extra.
func (c *Client) agentCallFor(ctx context.Context, caller, method, path string, q url.Values, in, out any, extra time.Duration) error {
	if caller == "" {
		caller = c.o.Agent
	} else if c.o.Agent != "" && caller != c.o.Agent {
		return model.Errorf(model.CodeInvalidArgs, "this client acts as %q, not %q", c.o.Agent, caller).
			WithHint("make a client with ClientOptions.Agent set to the caller")
	}
	return c.roundTrip(ctx, method, path, q, caller, in, out, extra)
}

// Tasks implements model.OperatorService.
func (c *Client) Tasks(ctx context.Context, f model.TaskFilter) ([]model.Task, error) {
	if f.Visible != "" {
		return nil, model.Errorf(model.CodeInvalidArgs, "the socket API has no Visible task filter; use an agent client's ListTasks")
	}
	q := url.Values{}
	clientSet(q, "state", string(f.State))
	clientSet(q, "agent", f.Agent)
	clientSet(q, "caller", f.Caller)
	clientSet(q, "target", f.Target)
	clientSet(q, "before", f.Before)
	clientSetLimit(q, f.Limit)
	var l TaskList
	err := c.call(ctx, http.MethodGet, "/v1/operator/tasks", q, nil, &l)
	return l.Tasks, err
}

// ShowTask implements model.OperatorService.
func (c *Client) ShowTask(ctx context.Context, id string) (model.TaskDetail, error) {
	p, err := clientTaskID(id)
	if err != nil {
		return model.TaskDetail{}, err
	}
	var d model.TaskDetail
	err = c.call(ctx, http.MethodGet, "/v1/operator/tasks/"+p, nil, nil, &d)
	return d, err
}

// CancelTaskAsOperator implements model.OperatorService.
func (c *Client) CancelTaskAsOperator(ctx context.Context, id string) (model.Task, error) {
	p, err := clientTaskID(id)
	if err != nil {
		return model.Task{}, err
	}
	var t model.Task
	err = c.call(ctx, http.MethodPost, "/v1/operator/tasks/"+p+"/cancel", nil, nil, &t)
	return t, err
}

// Messages implements model.OperatorService.
func (c *Client) Messages(ctx context.Context, f model.MessageFilter) ([]model.Message, error) {
	q := url.Values{}
	clientSet(q, "to", f.To)
	clientSet(q, "from", f.From)
	clientSet(q, "before", f.Before)
	if f.UnreadOnly {
		q.Set("unread_only", "true")
	}
	clientSetLimit(q, f.Limit)
	var l MessageList
	err := c.call(ctx, http.MethodGet, "/v1/operator/messages", q, nil, &l)
	return l.Messages, err
}

// InboxShares implements model.OperatorService.
func (c *Client) InboxShares(ctx context.Context, to string) ([]model.InboxShare, error) {
	q := url.Values{}
	clientSet(q, "to", to)
	var l ShareList
	err := c.call(ctx, http.MethodGet, "/v1/operator/shares", q, nil, &l)
	return l.OverShare, err
}

// Agents implements model.OperatorService.
func (c *Client) Agents(ctx context.Context) ([]model.AgentInfo, error) {
	var l AgentList
	err := c.call(ctx, http.MethodGet, "/v1/operator/agents", nil, nil, &l)
	return l.Agents, err
}

// ProbeAgent implements model.OperatorService. The call may take the
// probe's timeout (60 s when 0) on top of the client's own.
func (c *Client) ProbeAgent(ctx context.Context, name string, timeout time.Duration) (model.AgentInfo, error) {
	p, err := clientPathArg("name", name)
	if err != nil {
		return model.AgentInfo{}, err
	}
	q := url.Values{}
	if timeout != 0 {
		q.Set("timeout", timeout.String())
	}
	budget := timeout
	if budget <= 0 {
		budget = defaultProbeTimeout
	}
	var a model.AgentInfo
	err = c.roundTrip(ctx, http.MethodPost, "/v1/operator/agents/"+p+"/probe", q, "", nil, &a, budget)
	return a, err
}

// VerifyAgent implements model.OperatorService. The call may take the
// verification's timeout (60 s when 0) on top of the client's own.
func (c *Client) VerifyAgent(ctx context.Context, name string, timeout time.Duration) (model.Verification, error) {
	p, err := clientPathArg("name", name)
	if err != nil {
		return model.Verification{}, err
	}
	q := url.Values{}
	if timeout != 0 {
		q.Set("timeout", timeout.String())
	}
	budget := timeout
	if budget <= 0 {
		budget = defaultVerifyTimeout
	}
	var v model.Verification
	err = c.roundTrip(ctx, http.MethodPost, "/v1/operator/agents/"+p+"/verify", q, "", nil, &v, budget)
	return v, err
}

// VerifyAudit implements model.OperatorService.
func (c *Client) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	var r model.AuditReport
	err := c.call(ctx, http.MethodGet, "/v1/operator/audit/verify", nil, nil, &r)
	return r, err
}

// WatchEvents implements model.OperatorService: one long poll of GET
// /v1/operator/events. The call may take f.Wait on top of the client's
// own timeout.
func (c *Client) WatchEvents(ctx context.Context, f model.EventFilter) (model.EventBatch, error) {
	if f.TaskID != "" {
		if _, err := clientTaskID(f.TaskID); err != nil {
			return model.EventBatch{}, err
		}
	}
	q := url.Values{}
	clientSet(q, "task", f.TaskID)
	if f.After != model.AfterNow {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Wait > 0 {
		q.Set("wait", f.Wait.String())
	}
	var b model.EventBatch
	err := c.roundTrip(ctx, http.MethodGet, "/v1/operator/events", q, "", nil, &b, f.Wait)
	return b, err
}
