package gates

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hai-relay/relay/dispatch/supervisor"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/strictjson"
	"github.com/hai-relay/relay/spec"
)

// Defaults of the authority adapter client.
const (
	// DefaultAuthorityTimeout bounds one consultation when NewAuthority is
	// given no positive timeout (authority.timeout, 5 s; spec/authority.go).
	DefaultAuthorityTimeout = 5 * time.Second
	// DefaultAuthorityGrace is how long the client keeps reading the
	// adapter's output after the adapter exited, and after its process group
	// was killed, before it stops reading.
	DefaultAuthorityGrace = 200 * time.Millisecond
	// DefaultStderrExcerpt is the most of the adapter's stderr kept for the
	// audit: its first and last halves, with the number of bytes left out.
	DefaultStderrExcerpt = 4 << 10
	// MaxAdapterMessage is the most of a deny message kept, in bytes.
	MaxAdapterMessage = 2 << 10
)

// AuthorityOption configures NewAuthority.
type AuthorityOption func(*adapter)

// WithEnv adds environment entries ("KEY=value") to the adapter's
// environment, which otherwise holds only the relay's own PATH, HOME, LANG
// and TZ (BaseEnv): an adapter sees no secret of the daemon's environment
// that its configuration did not name. A code-loading variable
// (model.CodeLoadingVar: NODE_OPTIONS, LD_PRELOAD, …) is dropped.
func WithEnv(env ...string) AuthorityOption {
	return func(a *adapter) { a.env = append(a.env, env...) }
}

// BaseEnv names the variables of the relay's environment every adapter
// gets; WithEnv adds more.
var BaseEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// WithShim runs the adapter through a process shim: shim[0] is its
// executable, the rest its arguments, then come the adapter's resolved path
// and argv. The relay passes its own `__agent-shim` (package
// dispatch/agentshim), a child subreaper: when the adapter exits, or the
// shim gets SIGTERM (this client's stop, or the parent-death signal when
// the daemon dies), it kills every descendant of the adapter, those that
// left its process group included, and then exits the way the adapter did.
// Without a shim, a descendant that leaves the adapter's process group
// outlives the consultation.
func WithShim(shim ...string) AuthorityOption {
	return func(a *adapter) { a.shim = append([]string(nil), shim...) }
}

// WithStart sets what starts the adapter's process (default
// (*exec.Cmd).Start). The adapter (or its shim) gets a parent-death signal,
// which Linux sends when the *thread* that forked it ends (prctl(2),
// golang/go#27505): the daemon passes a supervisor.Starter's Start, whose
// thread lives as long as the daemon.
func WithStart(start func(*exec.Cmd) error) AuthorityOption {
	return func(a *adapter) {
		if start != nil {
			a.start = start
		}
	}
}

// WithDir runs the adapter in dir instead of the relay's working directory.
func WithDir(dir string) AuthorityOption { return func(a *adapter) { a.dir = dir } }

// NewAuthority returns the client of the authority adapter run by argv
// (argv[0] is the program, found on PATH when it has no slash; no shell is
// involved). It returns a nil model.Authority when argv is empty or
// argv[0] is "", so that the authority gate reports authority_not_configured:
// "no adapter" is a state the relay reports, not an error it hides. A
// timeout of zero or less means DefaultAuthorityTimeout.
//
// Each Consult runs the adapter once, in its own process group, writes one
// spec.AuthorityRequest as a JSON line to its stdin and closes it, and reads
// one spec.AuthorityResponse from its stdout:
//
//   - at most spec.AuthorityMaxResponse bytes are read; more is
//     authority_invalid_response and the group is killed at once;
//   - stderr is read to the end but only an excerpt is kept;
//   - after timeout the whole process group gets SIGKILL:
//     authority_timeout; a context deadline is authority_timeout too, a
//     canceled context authority_unavailable (both wrap ctx.Err());
//   - when the adapter exits, output is read for a short grace; then the
//     process group is killed in any case (nothing the adapter started in
//     its group outlives the consultation) and reading stops, so a
//     grandchild holding stdout open cannot hang Consult;
//   - a spawn error or a non-zero exit (or death by a signal) is
//     authority_unavailable, even when stdout held a valid allow;
//   - stdout must be exactly one JSON object, optionally surrounded by
//     JSON whitespace. Empty output, anything else or anything after it
//     is authority_invalid_response.
//
// When several of these apply, the first in this order decides: spawn
// error, context, timeout, oversized output, exit status, content.
//
// The answer is read strictly, with strictjson.Decode: no key given
// twice or differing from another only in case ("Decision" beside
// "decision"), at any depth, and no invalid UTF-8 or lone surrogate
// escape in any string. The known fields' keys match exactly
// (case-sensitive); decision, assurance, code and message must be strings
// (null counts as absent); decision is "allow" or "deny"; assurance, when
// present, is "standard" or "guarded" (absent means standard; "" is not
// absent); a deny needs a code of 1–128 characters of [A-Za-z0-9._:-].
// Unknown fields are accepted and ignored, so an adapter can add its own
// (a TTL, a trace id) without breaking the relay. On allow, code is ignored;
// on deny, assurance is checked but not used. Deny messages are cut to
// MaxAdapterMessage bytes.
//
// Every failure is a *model.Error with an authority_* code, a message, the
// code's hint, and the underlying detail in Err. The returned answer always
// carries ExitCode (-1 when there is no exit status), Elapsed and the
// stderr excerpt, also on failure. Consult is safe for concurrent use.
//
// The adapter is started, bounded, killed and reaped by package
// dispatch/supervisor, as agents are: it is not reaped until its group is
// killed, so the group id cannot be recycled in between. Process groups,
// pidfds and the parent-death signal make this client Linux-only.
func NewAuthority(argv []string, timeout time.Duration, opts ...AuthorityOption) model.Authority {
	if len(argv) == 0 || argv[0] == "" {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultAuthorityTimeout
	}
	a := &adapter{
		start:     (*exec.Cmd).Start,
		argv:      append([]string(nil), argv...),
		timeout:   timeout,
		grace:     DefaultAuthorityGrace,
		stderrMax: DefaultStderrExcerpt,
		now:       time.Now,
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

type adapter struct {
	start     func(*exec.Cmd) error
	shim      []string
	argv      []string
	timeout   time.Duration
	grace     time.Duration
	env       []string
	dir       string
	stderrMax int
	now       func() time.Time
}

// String names the adapter's program for logs.
func (a *adapter) String() string {
	if a == nil {
		return "authority(none)"
	}
	return "authority(" + strconv.Quote(a.argv[0]) + ")"
}

// Consult implements model.Authority.
func (a *adapter) Consult(ctx context.Context, req model.AuthorityRequest) (model.AuthorityAnswer, error) {
	if a == nil {
		return model.AuthorityAnswer{ExitCode: -1},
			authErr(model.CodeAuthorityNotConfigured, nil, "no authority adapter is configured")
	}
	if req.RequestID == "" {
		req.RequestID = NewRequestID()
	}
	if req.RequestedAt.IsZero() {
		req.RequestedAt = a.now()
	}
	body, err := encodeRequest(req)
	if err != nil { // cannot happen for strings and ints
		return model.AuthorityAnswer{ExitCode: -1},
			authErr(model.CodeAuthorityUnavailable, err, "the authority request could not be encoded")
	}

	start := time.Now()
	r := a.run(ctx, body)
	ans := model.AuthorityAnswer{Stderr: r.stderr, ExitCode: r.ExitCode, Elapsed: time.Since(start)}
	if e := a.runFailure(r); e != nil {
		return ans, e
	}

	resp, why, err := parseResponse(r.Stdout)
	if why != "" {
		return ans, authErr(model.CodeAuthorityInvalidResponse, stdoutErr(err, r.Stdout),
			"the authority adapter's answer is invalid: %s", why)
	}
	switch resp.Decision {
	case spec.DecisionAllow:
		ans.Allow = true
		ans.Assurance = model.Assurance(resp.Assurance)
		if ans.Assurance == "" {
			ans.Assurance = model.AssuranceStandard
		}
	case spec.DecisionDeny:
		ans.DenyCode = resp.Code
	}
	ans.Message = truncateUTF8(resp.Message, MaxAdapterMessage)
	return ans, nil
}

// encodeRequest is req as the adapter reads it: one spec.AuthorityRequest
// as a JSON line.
func encodeRequest(req model.AuthorityRequest) ([]byte, error) {
	chain := make([]spec.AuthorityHop, 0, len(req.Chain))
	for _, h := range req.Chain {
		chain = append(chain, spec.AuthorityHop(h))
	}
	body, err := json.Marshal(spec.AuthorityRequest{
		Version:      spec.AuthorityProtocolVersion,
		RequestID:    req.RequestID,
		TaskID:       req.TaskID,
		MissionID:    req.MissionID,
		LeaseID:      req.LeaseID,
		Caller:       req.Caller,
		Target:       req.Target,
		Mode:         string(req.Mode),
		RequestedAt:  req.RequestedAt.UTC().Format(time.RFC3339Nano),
		ParentTaskID: req.ParentTaskID,
		Chain:        chain,
		Depth:        len(req.Chain) + 1,
	})
	return append(body, '\n'), err
}

// runFailure is the error a run ends the consultation with before its
// output is read, nil when there is none; the first that applies in
// NewAuthority's order decides.
func (a *adapter) runFailure(r runResult) *model.Error {
	switch {
	case r.StartErr != nil:
		return authErr(model.CodeAuthorityUnavailable, r.StartErr,
			"the authority adapter %q could not be started", a.argv[0])
	case r.CtxErr != nil && errors.Is(r.CtxErr, context.DeadlineExceeded):
		return authErr(model.CodeAuthorityTimeout, r.CtxErr,
			"the consultation's deadline passed before the authority adapter answered; its process group was killed")
	case r.CtxErr != nil:
		return authErr(model.CodeAuthorityUnavailable, r.CtxErr,
			"the consultation was canceled before the authority adapter answered; its process group was killed")
	case r.TimedOut:
		return authErr(model.CodeAuthorityTimeout, nil,
			"the authority adapter did not answer within %s; its process group was killed", a.timeout)
	case r.Oversized:
		return authErr(model.CodeAuthorityInvalidResponse, nil,
			"the authority adapter wrote more than %d bytes to stdout", spec.AuthorityMaxResponse)
	case r.ExitCode != 0:
		how := "exited with status " + strconv.Itoa(r.ExitCode)
		if r.Signal != "" {
			how = "was killed by signal " + r.Signal
		}
		return authErr(model.CodeAuthorityUnavailable, r.WaitErr,
			"the authority adapter %s; its output is ignored", how)
	}
	return nil
}

// runResult is one run of the adapter: what the supervisor found, and the
// stderr excerpt.
type runResult struct {
	supervisor.Result
	stderr string
}

// run runs the adapter once on input, bounded as NewAuthority describes
// (supervisor.Run does the bounding). Every goroutine it starts has ended
// when it returns, and the adapter's process group has been sent SIGKILL.
func (a *adapter) run(ctx context.Context, input []byte) runResult {
	ex := newExcerpt(a.stderrMax)
	// Whatever the config or the daemon's environment holds, no
	// code-loading variable reaches the adapter.
	env, _ := model.WithoutCodeLoading(append(baseEnv(os.Getenv), a.env...))
	s := supervisor.Spec{Argv: a.argv, Dir: a.dir, Env: env, Stderr: ex, Shim: a.shim, Start: a.start}
	res := supervisor.Run(ctx, s, input, supervisor.Limits{
		Timeout: a.timeout, Grace: a.grace, StdoutMax: spec.AuthorityMaxResponse})
	return runResult{Result: res, stderr: ex.String()}
}

// parseResponse reads out as exactly one JSON object holding a
// spec.AuthorityResponse, as NewAuthority describes. why is "" when the
// response is valid; err is an underlying decoding error, if any.
func parseResponse(out []byte) (resp spec.AuthorityResponse, why string, err error) {
	if len(bytes.Trim(out, " \t\r\n")) == 0 {
		return resp, "empty output", nil
	}
	// One reading only (strictjson.Decode, as the socket API and the MCP
	// arguments): exactly one object, no key twice or differing from
	// another only in case (a "Decision" beside "decision"), at any depth,
	// and no lone surrogate or invalid UTF-8 that decoding would replace.
	// Unknown keys are read as strictly and then ignored.
	var fields map[string]json.RawMessage
	if err := strictjson.Decode(out, &fields); err != nil {
		return resp, err.Error(), err
	}
	var decision, assurance, code, message *string
	for _, f := range []struct {
		key string
		dst **string
	}{{"decision", &decision}, {"assurance", &assurance}, {"code", &code}, {"message", &message}} {
		key, dst := f.key, f.dst
		raw, ok := fields[key]
		if !ok || string(raw) == "null" {
			continue
		}
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return resp, "field " + key + " is not a string", nil
		}
		*dst = &s
	}

	if assurance != nil {
		switch model.Assurance(*assurance) {
		case model.AssuranceStandard, model.AssuranceGuarded:
			resp.Assurance = *assurance
		default:
			return resp, "unknown assurance " + quote(*assurance), nil
		}
	}
	if message != nil {
		resp.Message = *message
	}
	if decision == nil {
		return resp, "missing decision", nil
	}
	resp.Decision = *decision
	switch resp.Decision {
	case spec.DecisionAllow:
	case spec.DecisionDeny:
		if code == nil || *code == "" {
			return resp, "deny without a code", nil
		}
		if !ValidID(*code) {
			return resp, "deny code " + quote(*code) + " is not 1–128 characters of [A-Za-z0-9._:-]", nil
		}
		resp.Code = *code
	default:
		return resp, "unknown decision " + quote(resp.Decision), nil
	}
	return resp, "", nil
}

func authErr(code model.Code, err error, format string, args ...any) *model.Error {
	e := spec.Errorf(code, format, args...)
	e.Err = err
	return e
}

// stdoutErr records the start of an invalid stdout for the audit.
func stdoutErr(err error, out []byte) error {
	const show = 256
	head := out
	if len(head) > show {
		head = head[:show]
	}
	s := fmt.Sprintf("stdout (%d bytes) began %q", len(out), head)
	if err != nil {
		return fmt.Errorf("%w; %s", err, s)
	}
	return errors.New(s)
}

// quote quotes s for a message, cut to 64 bytes.
func quote(s string) string { return strconv.Quote(truncateUTF8(s, 64)) }

// truncateUTF8 cuts s to at most n bytes without splitting a rune, and
// replaces invalid UTF-8.
func truncateUTF8(s string, n int) string {
	if len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// excerpt keeps the first and last halves of at most max bytes written to
// it, and counts the rest.
type excerpt struct {
	headMax, tailMax int
	head, tail       []byte
	total            int64
}

func newExcerpt(max int) *excerpt {
	h := max / 2
	return &excerpt{headMax: h, tailMax: max - h,
		head: make([]byte, 0, h), tail: make([]byte, 0, max-h)}
}

func (e *excerpt) Write(p []byte) (int, error) {
	n := len(p)
	e.total += int64(n)
	if room := e.headMax - len(e.head); room > 0 {
		k := min(room, len(p))
		e.head = append(e.head, p[:k]...)
		p = p[k:]
	}
	switch {
	case len(p) == 0:
	case len(p) >= e.tailMax:
		e.tail = append(e.tail[:0], p[len(p)-e.tailMax:]...)
	default:
		if drop := len(e.tail) + len(p) - e.tailMax; drop > 0 {
			e.tail = append(e.tail[:0], e.tail[drop:]...)
		}
		e.tail = append(e.tail, p...)
	}
	return n, nil
}

// String returns the excerpt as valid UTF-8, marking any omission.
func (e *excerpt) String() string {
	kept := int64(len(e.head) + len(e.tail))
	if kept == e.total {
		return strings.ToValidUTF8(string(e.head)+string(e.tail), "\uFFFD")
	}
	return strings.ToValidUTF8(string(e.head), "\uFFFD") +
		"\n… [" + strconv.FormatInt(e.total-kept, 10) + " bytes omitted] …\n" +
		strings.ToValidUTF8(string(e.tail), "\uFFFD")
}

// baseEnv returns the BaseEnv entries of the environment getenv reads, in
// that order, leaving out the unset and empty ones.
func baseEnv(getenv func(string) string) []string {
	env := make([]string, 0, len(BaseEnv))
	for _, k := range BaseEnv {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
