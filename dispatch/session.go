package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch/acpwire"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// stopCause is why a run was asked to stop. The first cause wins.
type stopCause int

const (
	causeNone       stopCause = iota
	causeCancel               // Cancel(taskID), or a probe's ctx
	causeTimeout              // TaskTimeout (or the probe timeout) elapsed
	causeShutdown             // Stop / Close
	causeProtocol             // garbage on the agent's stdout: killed at once
	causeUnsafeMode           // the session switched to a mode its profile does not accept: killed at once
)

// graceful causes send session/cancel and wait CancelGrace before the kill.
func (c stopCause) graceful() bool {
	return c == causeCancel || c == causeTimeout || c == causeShutdown
}

// stage is the step a run is in; failures and timeouts name it.
type stage string

const (
	stageSpawn      stage = "spawn"
	stageInitialize stage = "initialize"
	stageNewSession stage = "session/new"
	stageSetMode    stage = "session/set_mode"
	stageHardening  stage = "hardening"
	stageStart      stage = "start"
	stagePrompt     stage = "prompt"
)

// authRequiredCode is ACP's auth_required error code (-32000), taken from
// the SDK's own constructor rather than repeated here.
var authRequiredCode = acp.NewAuthRequired(nil).Code

// exitPoliteness is how long a run waits, after its turn ended and its
// stdin was closed, for the agent to exit by itself before the group is
// killed anyway.
const exitPoliteness = 500 * time.Millisecond

// drainAfterExit bounds how long the connection may stay open after the
// agent's leader process exited (a descendant that left the group could
// hold stdout open forever).
const drainAfterExit = time.Second

// session is one agent process and its ACP connection: a task's run or a
// probe. Its fields are grouped by concern: what the run is for
// (runTask), the hardening it runs under (runHardening), its process and
// connection (runWire), and its state, under mu.
type session struct {
	d *Dispatcher
	runTask
	runHardening
	runWire

	// The start-up deadline (startup.go): its length (zero: none) and its
	// timer; setUp, under mu, says that it no longer applies.
	startTimeout time.Duration
	startTimer   *time.Timer

	stopc chan struct{}

	mu          sync.Mutex
	setUp       bool
	cause       stopCause
	stopStage   stage
	stage       stage
	garbage     string
	setupCancel context.CancelFunc
	graceKill   bool
	unsafeWhy   string // causeUnsafeMode: what was seen
	pidNS       uint64 // the sandbox's pid namespace (sandboxNS), once known
	agentInfo   *acp.Implementation
}

// runTask is what a run is for, fixed when it is made.
type runTask struct {
	agent   string
	argv    []string
	taskID  string // "" for a probe
	mode    model.Mode
	cwd     string
	prompt  []acp.ContentBlock
	timeout time.Duration
	log     *boundedLog
	servers []MCPServer // passed to state_changing sessions
}

// runHardening is the hardening a run is launched under, and the
// directories its sandbox makes.
type runHardening struct {
	// profiles are the agent's hardening profiles, one per adapter
	// generation (none: the agent has no profile); profile is the one the
	// session was launched under (nil: none), rule its rule for mode.
	profiles []*hardening.Profile
	profile  *hardening.Profile
	rule     *hardening.Rule
	adapter  Adapter // what the command resolved to before the start
	// refused says why no profile covers the installed adapter (it is
	// refused after initialize); guessed, that the installed adapter was
	// not identified before the start, so profile is a guess that
	// initialize must confirm.
	refused string
	guessed bool
	extra   hardening.Launch // a verification's redirect, applied after the rule
	// bare is what the sandbox takes of the profile's rule when the test
	// switch runs the agent without its profile (bareRule); nil else.
	bare *hardening.Rule
	// sandboxDir holds the run's per-task sandbox directories (scratch,
	// state), removed at teardown; "" before the start.
	sandboxDir string
	// ownDir is the session's own directory (Rule.OwnDir), removed at
	// teardown; "" without one.
	ownDir string
}

// runWire is a run's agent process and what reads and answers it.
type runWire struct {
	p      *proc
	rec    *runRecordHandle // nil without a Home
	tail   *stderrTail
	stdout *acpwire.Limiter
	conn   *acp.ClientSideConnection
	client *client
	timer  *time.Timer
	bg     sync.WaitGroup // the session's helper goroutines
}

// runResult is what drive observed, classified after teardown.
type runResult struct {
	stage        stage // where it ended
	err          error
	disconnected bool // the connection was gone when err was returned
	resp         *acp.PromptResponse
	sessionMode  string
	startErr     error  // the reporter refused Started
	unsafe       string // the session's mode was not accepted before the prompt: why
	// adapterCause: unsafe is the adapter's doing (its generation, its
	// modes), not the user's settings.
	adapterCause bool
}

func newSession(d *Dispatcher, spec AgentSpec, taskID string, mode model.Mode, cwd string, prompt []acp.ContentBlock, timeout time.Duration, log *boundedLog) *session {
	s := &session{d: d, stopc: make(chan struct{}), stage: stageSpawn,
		runTask: runTask{agent: spec.Name, argv: spec.Command, taskID: taskID, mode: mode, cwd: cwd,
			prompt: prompt, timeout: timeout, log: log, servers: spec.MCPServers},
		runHardening: runHardening{profiles: spec.Profiles}}
	if d.unhardened(spec.Name) != "" {
		// Without the profile's session options, still in the sandbox the
		// profile's agent needs to run at all (its own home).
		s.bare = bareRule(spec.Profiles, mode)
		s.profiles = nil
	}
	s.tail = newStderrTail(log)
	if len(s.profiles) == 0 {
		return s
	}
	s.adapter = d.o.Registry.adapter(spec)
	c, guessed := hardening.Pick(s.agent, s.profiles, s.adapter.Package, s.adapter.Version)
	s.profile, s.refused, s.guessed = c.Profile, c.Refused, guessed
	s.useProfile(s.profile)
	return s
}

// useProfile makes p, and its rule for the session's mode, the session's.
func (s *session) useProfile(p *hardening.Profile) {
	s.profile, s.rule = p, nil
	if p == nil {
		return
	}
	if r, ok := p.Rules[s.mode]; ok {
		r = r.WithNonce("relay-" + newRunID()[:12])
		s.rule = &r
	}
}

// confirmProfile checks, once the agent has reported itself at
// initialize, that the profile the session was launched under is the one
// for the adapter running, and returns why not ("" when it is). A session
// launched under a guess takes the profile of the adapter reported, if it
// is launched the same way.
func (s *session) confirmProfile(info *acp.Implementation) string {
	if s.refused != "" {
		return s.refused
	}
	var name, version string
	if info != nil {
		name, version = info.Name, info.Version
	}
	if name == "" && !s.guessed {
		return "" // identified on disk; the adapter names nothing more
	}
	c := hardening.Choose(s.agent, s.profiles, name, version)
	switch {
	case c.Profile == s.profile:
		return ""
	case c.Profile == nil && !s.guessed:
		return fmt.Sprintf("the installed package is %s (%s), but the adapter reports %s at initialize: %s",
			s.adapter.Describe(), s.adapter.PackageJSON, strings.TrimSpace(name+" "+version), c.Refused)
	case c.Profile == nil:
		return c.Refused
	case !s.guessed:
		return fmt.Sprintf("the installed package is %s (%s, profile %s), but the adapter reports %s at initialize (profile %s)",
			s.adapter.Describe(), s.adapter.PackageJSON, s.profile.Name, strings.TrimSpace(name+" "+version), c.Profile.Name)
	}
	was, now := s.profile.Rules[s.mode], c.Profile.Rules[s.mode]
	if !hardening.SameLaunch(&was, &now) || (s.extra.Adds() && s.profile.Verify != c.Profile.Verify) {
		return fmt.Sprintf("the adapter reports %s (profile %s), but %s could not be identified before it started (no package.json above %s), "+
			"and that profile launches it differently: set [agents.%s] command to the adapter's own installed executable",
			strings.TrimSpace(name+" "+version), c.Profile.Name, s.argv[0], s.adapter.Describe(), s.agent)
	}
	s.useProfile(c.Profile)
	return ""
}

// start spawns the agent and wires the connection. On error nothing is
// left running.
func (s *session) start() error {
	run := ""
	if s.d.o.Home != "" {
		run = newRunID()
	}
	argv, env, unset, err := s.launch(run)
	if err != nil {
		return err
	}
	if argv, env, err = s.sandboxed(argv, env); err != nil {
		s.removeSandbox()
		s.log.Printf("could not sandbox the agent: %v", err)
		return fmt.Errorf("sandboxing the agent: %w", err)
	}
	p, err := startProc(s.d.spawner, procSpec{argv: argv, dir: s.cwd, env: env, unset: unset, stderr: s.tail})
	if err != nil {
		s.removeSandbox()
		s.log.Printf("could not start %q: %v", argv, err)
		return err
	}
	rec, err := s.d.recordRun(s, p, run)
	if err != nil {
		// Without its record a crash of the daemon could leave the
		// agent's descendants behind: start nothing.
		s.log.Printf("could not write the run record of pid %d: %v; killing it", p.pid, err)
		_ = p.reap()
		s.removeSandbox()
		return fmt.Errorf("%w: %w", errRunRecord, err)
	}
	s.mu.Lock()
	s.p = p
	s.rec = rec
	s.mu.Unlock()
	s.log.Printf("started %q pid %d in %s", argv, p.pid, s.cwd)
	s.connect(p)
	s.timer = time.AfterFunc(s.timeout, func() { s.stop(causeTimeout) })
	s.armStart()
	s.bg.Add(1)
	go s.watchdog()
	return nil
}

// launch is the agent's argv, environment and the variables removed from
// it, before the sandbox: the daemon's variables for agents, the run's id
// (run, when set), the hardening rule's and the verification redirect's
// (extra) variables, arguments and files, and the agent's own directory.
func (s *session) launch(run string) (argv, env, unset []string, err error) {
	env = s.d.o.Env
	if run != "" {
		env = append(slices.Clip(env), runEnvVar+"="+run)
	}
	argv = s.argv
	if s.rule != nil {
		env = append(slices.Clip(env), s.rule.Env...)
		if s.rule.Unset != nil {
			var why string
			if unset, why = s.rule.Unset(); len(unset) > 0 {
				s.log.Printf("removed %s from the agent's environment: %s", strings.Join(unset, ", "), why)
			}
		}
		if argv, err = ruleArgv(s.rule, s.argv, s.d.profileDir); err != nil {
			s.log.Printf("could not write the hardening profile's files: %v", err)
			return nil, nil, nil, fmt.Errorf("writing the hardening profile's files: %w", err)
		}
	}
	if s.extra.Adds() {
		env = append(slices.Clip(env), s.extra.Env...)
		argv = append(slices.Clip(argv), s.extra.Args...)
		unset = append(slices.Clip(unset), s.extra.Unset...)
	}
	env = append(slices.Clip(env), s.jsonEnv(env)...)
	if s.rule != nil && s.rule.OwnDir != nil {
		ownEnv, err := s.makeOwnDir(env)
		if err != nil {
			s.log.Printf("could not make the agent's own %s: %v", s.rule.OwnDir.Var, err)
			return nil, nil, nil, fmt.Errorf("making the agent's own %s: %w", s.rule.OwnDir.Var, err)
		}
		env = append(slices.Clip(env), ownEnv...)
	}
	return argv, env, unset, nil
}

// connect wires the ACP connection to the started agent p: the client that
// denies every permission request, behind the stdout limiter.
func (s *session) connect(p *proc) {
	s.client = newClient(s.log.Printf)
	if s.rule != nil {
		s.client.modeText = s.rule.ModeText
	}
	// A session the agent opened itself (a subagent's) is refused: it is
	// told to cancel, and its requests are denied like the relay's own.
	s.client.onForeign = func(id acp.SessionId) {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			_ = s.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: id})
		}()
	}
	s.stdout = acpwire.NewLimiter(p.stdout, s.onGarbage)
	s.stdout.Note = s.log.Printf
	s.stdout.OnRequest = s.client.noteRequest
	s.client.onUpdate = s.stdout.Processed
	s.client.awaitUpdates = func() { s.stdout.AwaitProcessed(time.Second) }
	// The connection's receive loop starts at once and reads the logger
	// when it ends, which an agent that dies at start makes it do before
	// SetLogger returns (a data race, seen under -race): it reads nothing
	// of the agent until the logger is set.
	ready := make(chan struct{})
	s.conn = acp.NewClientSideConnection(s.client, s.stdout.Writer(p.stdin), heldReader{s.stdout, ready})
	s.conn.SetLogger(slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	close(ready)
}

// jsonEnv returns the rule's and the redirect's JSON variables (Rule.
// EnvJSON), each merged over the value the agent would otherwise get: the
// daemon's, or env's last.
func (s *session) jsonEnv(env []string) []string {
	names := map[string]bool{}
	if s.rule != nil {
		for k := range s.rule.EnvJSON {
			names[k] = true
		}
	}
	for k := range s.extra.EnvJSON {
		names[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(names)) {
		base, ok := hardening.EnvValue(env, k)
		if !ok {
			base = os.Getenv(k)
		}
		var layers []map[string]any
		if s.rule != nil && s.rule.EnvJSON[k] != nil {
			layers = append(layers, s.rule.EnvJSON[k])
		}
		if s.extra.EnvJSON[k] != nil {
			layers = append(layers, s.extra.EnvJSON[k])
		}
		merged, err := hardening.MergeJSONEnv(base, layers...)
		if err != nil {
			s.log.Printf("%s in the daemon's environment is replaced, not merged: %v", k, err)
			merged, _ = hardening.MergeJSONEnv("", layers...)
		}
		out = append(out, k+"="+merged)
	}
	return out
}

// watchdog closes the agent's stdout shortly after its leader exited, so
// that the connection ends even if a descendant holds the pipe open.
func (s *session) watchdog() {
	defer s.bg.Done()
	<-s.p.exited
	t := time.NewTimer(drainAfterExit)
	defer t.Stop()
	select {
	case <-s.conn.Done():
	case <-t.C:
		s.log.Printf("agent exited but its stdout stayed open; closing it")
		_ = s.p.stdout.Close()
		s.stdout.Close()
	}
}

func (s *session) onGarbage(why string, line []byte) {
	const max = 200
	excerpt := line
	if len(excerpt) > max {
		excerpt = excerpt[:max]
	}
	s.log.Printf("protocol violation: the agent wrote %s on stdout: %q", why, excerpt)
	s.mu.Lock()
	if s.garbage == "" {
		s.garbage = why
	}
	s.mu.Unlock()
	s.stop(causeProtocol)
}

func (s *session) setStage(st stage) {
	s.mu.Lock()
	s.stage = st
	s.mu.Unlock()
}

// stop asks the run to stop. It never blocks; the first cause wins.
func (s *session) stop(c stopCause) {
	s.mu.Lock()
	if s.cause != causeNone || (c == causeStartTimeout && s.setUp) {
		s.mu.Unlock()
		return
	}
	s.cause, s.stopStage = c, s.stage
	cancel := s.setupCancel
	p := s.p
	s.mu.Unlock()
	close(s.stopc)
	if cancel != nil {
		cancel()
	}
	if (c == causeProtocol || c == causeUnsafeMode || c == causeStartTimeout) && p != nil {
		p.killGroup()
	}
}

// kill kills the process group at once (Stop whose ctx expired).
func (s *session) kill() {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p != nil {
		p.killGroup()
	}
}

func (s *session) stopState() (stopCause, stage, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause, s.stopStage, s.garbage, s.graceKill
}

func connDone(c *acp.ClientSideConnection) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// drive runs initialize → session/new → (hardening) → onStarted → prompt.
// onStarted, which may be nil (probes), gets the setup note.
func (s *session) drive(onStarted func(note string) error) runResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.mu.Lock()
	s.setupCancel = cancel
	early := s.cause != causeNone
	s.mu.Unlock()
	if early {
		cancel()
	}
	if r, ok := s.initialize(ctx); !ok {
		return r
	}
	sid, r, ok := s.newSession(ctx)
	if !ok {
		return r
	}
	mode := string(s.client.modeState().mode)
	s.log.Printf("%s", s.setupNote(mode))

	// Setup is over: from here a stop goes through session/cancel, and
	// the start-up deadline no longer applies.
	s.mu.Lock()
	s.setupCancel = nil
	s.setUp = true
	stopped := s.cause != causeNone
	s.mu.Unlock()
	if stopped {
		return s.failed(s.stageNow(), context.Canceled, mode)
	}

	if onStarted != nil {
		s.setStage(stageStart)
		if err := onStarted(s.setupNote(mode)); err != nil {
			return runResult{stage: stageStart, startErr: err, sessionMode: mode}
		}
	}

	s.setStage(stagePrompt)
	a := s.runPrompt(sid)
	if a.err != nil {
		return runResult{stage: stagePrompt, err: a.err, disconnected: a.disconnected, sessionMode: mode}
	}
	return runResult{stage: stagePrompt, resp: &a.resp, sessionMode: mode}
}

// failed is the result of a run that failed at st with err.
func (s *session) failed(st stage, err error, mode string) runResult {
	return runResult{stage: st, err: err, disconnected: connDone(s.conn), sessionMode: mode}
}

// initialize runs initialize and checks what the agent said of itself
// against its hardening profile: ok false means the run ends with r.
func (s *session) initialize(ctx context.Context) (r runResult, ok bool) {
	s.setStage(stageInitialize)
	ir, err := s.conn.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersionNumber,
		ClientCapabilities: clientCapabilities(),
		ClientInfo:         &acp.Implementation{Name: "hai-relay", Version: "1"},
	})
	if err != nil {
		return s.failed(stageInitialize, err, ""), false
	}
	if ir.ProtocolVersion != acp.ProtocolVersionNumber {
		return s.failed(stageInitialize, fmt.Errorf("the agent speaks ACP protocol version %d; the relay speaks %d",
			ir.ProtocolVersion, acp.ProtocolVersionNumber), ""), false
	}
	s.mu.Lock()
	s.agentInfo = ir.AgentInfo
	s.mu.Unlock()
	if ir.AgentInfo != nil {
		s.d.o.Registry.noteVersion(s.agent, ir.AgentInfo.Version)
	}
	if len(s.profiles) > 0 {
		if why := s.confirmProfile(ir.AgentInfo); why != "" {
			return runResult{stage: stageHardening, unsafe: why, adapterCause: true}, false
		}
	}
	if s.profile != nil && s.rule == nil {
		return runResult{stage: stageHardening, unsafe: fmt.Sprintf("the profile has no rule for %s tasks", s.mode)}, false
	}
	if s.rule != nil {
		if why := s.rule.Precheck(s.cwd); why != "" {
			return runResult{stage: stageHardening, unsafe: why}, false
		}
	}
	return runResult{}, true
}

// newSession opens the session, in the task's cwd with the profile's
// _meta, and holds it to the profile's mode and options: ok false means
// the run ends with r.
func (s *session) newSession(ctx context.Context) (acp.SessionId, runResult, bool) {
	s.setStage(stageNewSession)
	req := acp.NewSessionRequest{Cwd: s.cwd, McpServers: s.mcpServers()}
	if s.rule != nil && s.rule.Meta != nil {
		req.Meta = s.rule.Meta
		if s.rule.Preapprove != nil && len(req.McpServers) > 0 {
			var names []string
			for _, m := range req.McpServers {
				names = append(names, m.Stdio.Name)
			}
			req.Meta = s.rule.Preapprove(req.Meta, names)
		}
	}
	ns, err := s.conn.NewSession(ctx, req)
	if err != nil {
		return "", s.failed(stageNewSession, err, ""), false
	}
	s.client.setSession(ns.SessionId)
	st := modeState{}
	if ns.Modes != nil {
		st.mode, st.hasMode = ns.Modes.CurrentModeId, true
		for _, m := range ns.Modes.AvailableModes {
			st.available = append(st.available, m.Id)
		}
	}
	st.setOptions(ns.ConfigOptions)
	s.client.setModeState(st)
	if s.rule != nil {
		if why, err := s.harden(ctx, ns.SessionId); why != "" {
			if err != nil && (connDone(s.conn) || ctx.Err() != nil) {
				// Not a refusal of the mode: the agent died, or the run was
				// stopped, while it was being set.
				return "", s.failed(s.stageNow(), err, ""), false
			}
			mode := string(s.client.modeState().mode)
			return "", runResult{stage: stageHardening, unsafe: why, sessionMode: mode}, false
		}
	}
	return ns.SessionId, runResult{}, true
}

func (s *session) stageNow() stage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stage
}

// mcpServers are the MCP servers session/new passes: the agent's
// configured ones for a state_changing task, none otherwise.
func (s *session) mcpServers() []acp.McpServer {
	out := []acp.McpServer{}
	if s.mode != model.ModeStateChanging {
		return out
	}
	for _, m := range s.servers {
		env := []acp.EnvVariable{}
		for _, k := range slices.Sorted(maps.Keys(m.Env)) {
			env = append(env, acp.EnvVariable{Name: k, Value: m.Env[k]})
		}
		out = append(out, acp.McpServer{Stdio: &acp.McpServerStdio{Name: m.Name, Command: m.Command[0],
			Args: slices.Clone(m.Command[1:]), Env: env}})
	}
	return out
}

// harden applies the session's profile rule: selects its mode, sets its
// config options, checks the result and arms the check of every later mode
// or option update. It returns why the session is not safe to prompt, or
// "", and the error of the request that failed, if one did.
func (s *session) harden(ctx context.Context, sid acp.SessionId) (string, error) {
	r := s.rule
	if r.SetMode != "" {
		if st := s.client.modeState(); !st.hasMode || st.mode != r.SetMode {
			if !slices.Contains(st.available, r.SetMode) {
				return fmt.Sprintf("the agent does not offer session mode %q (offered: %s)", r.SetMode, quoteModes(st.available)), nil
			}
			s.setStage(stageSetMode)
			if _, err := s.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: sid, ModeId: r.SetMode}); err != nil {
				return fmt.Sprintf("session/set_mode %q failed: %s", r.SetMode, errText(err)), err
			}
			s.client.setMode(r.SetMode)
		}
	}
	for _, pin := range r.Options {
		s.setStage(stageSetMode)
		resp, err := s.conn.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{
			ValueId: &acp.SetSessionConfigOptionValueId{SessionId: sid, ConfigId: pin.ID, Value: pin.Value}})
		if err != nil {
			return fmt.Sprintf("session/set_config_option %s=%q failed: %s", pin.ID, pin.Value, errText(err)), err
		}
		s.client.setOptions(resp.ConfigOptions)
	}
	s.setStage(stageHardening)
	st := s.client.armModeGuard(func(st modeState) {
		if why := unsafeState(r, st); why != "" {
			s.stopUnsafe(why)
		}
	})
	return unsafeState(r, st), nil
}

// stopUnsafe stops the run at once: the agent switched to a mode its
// profile does not accept.
func (s *session) stopUnsafe(why string) {
	s.mu.Lock()
	if s.cause == causeNone {
		s.unsafeWhy = why
	}
	s.mu.Unlock()
	s.log.Printf("agent_unsafe_mode: %s; stopping the agent", why)
	s.stop(causeUnsafeMode)
}

// setupNote says how the session was set up: its mode and the profile it
// runs under (kept on the working event and in the task log).
func (s *session) setupNote(mode string) string {
	s.mu.Lock()
	info := s.agentInfo
	s.mu.Unlock()
	m := fmt.Sprintf("session mode %q", mode)
	if mode == "" {
		m = "no session mode reported"
	}
	if s.profile == nil {
		running := "an adapter that did not report its version"
		if info != nil && info.Version != "" {
			running = strings.TrimSpace(info.Name + " " + info.Version)
		}
		return m + " (not chosen by the relay); " + hardening.NoProfileSummary + "; running " + running
	}
	return m + "; " + s.profile.VersionNote(info) + ": " + s.rule.Summary
}

// runPrompt sends session/prompt and waits for its answer. A stop request
// sends session/cancel and waits CancelGrace for the turn to end, then
// kills the process group; garbage kills at once. The wait for the answer
// always ends: a dead agent closes the connection (the watchdog makes sure).
func (s *session) runPrompt(sid acp.SessionId) promptAnswer {
	ch := make(chan promptAnswer, 1)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		resp, err := s.conn.Prompt(context.Background(), acp.PromptRequest{SessionId: sid, Prompt: s.prompt})
		ch <- promptAnswer{resp, err, err != nil && connDone(s.conn)}
	}()
	select {
	case a := <-ch:
		return a
	case <-s.stopc:
	}
	cause, _, _, _ := s.stopState()
	if cause.graceful() {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			// A notification; the write may block on a stuck agent until
			// teardown closes stdin.
			_ = s.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: sid})
		}()
		grace := s.d.o.CancelGrace
		s.log.Printf("sent session/cancel; waiting up to %s for the turn to end", grace)
		t := time.NewTimer(grace)
		select {
		case a := <-ch:
			t.Stop()
			return a
		case <-t.C:
		}
		s.mu.Lock()
		s.graceKill = true
		s.mu.Unlock()
		s.log.Printf("the turn did not end within %s of session/cancel; killing the process group", grace)
	}
	s.p.killGroup()
	return <-ch
}

// promptAnswer is what session/prompt returned.
type promptAnswer struct {
	resp         acp.PromptResponse
	err          error
	disconnected bool // the connection was gone when err was returned
}

// teardown ends the process and the connection and waits for every helper
// goroutine. It is called exactly once, after drive.
func (s *session) teardown() {
	s.timer.Stop()
	s.disarmStart()
	_ = s.p.stdin.Close() // EOF: a well-behaved agent exits now
	polite := min(exitPoliteness, s.d.o.CancelGrace)
	t := time.NewTimer(polite)
	select {
	case <-s.p.exited:
	case <-t.C:
	}
	t.Stop()
	_ = s.p.reap() // SIGKILL the group (descendants too), reap, close pipes
	s.removeSandbox()
	if s.ownDir != "" {
		_ = os.RemoveAll(s.ownDir)
	}
	s.d.dropRecord(s.rec)
	s.stdout.Close()
	_ = s.p.stdout.Close()
	<-s.conn.Done()
	s.bg.Wait()
	s.log.Printf("agent process %d ended: %s", s.p.pid, s.p.exitDescription())
}

// outcome classifies a finished run. Called after teardown.
func (s *session) outcome(res runResult) model.Outcome {
	result, note := s.client.result()
	result.SessionMode = res.sessionMode
	out := model.Outcome{Result: result}
	cause, stopStage, garbage, graceKill := s.stopState()
	exit := s.p.exitDescription()

	set := func(st model.State, code model.Code, msg string) {
		out.State, out.Code, out.Message = st, code, msg
	}
	switch {
	case res.unsafe != "" && res.adapterCause:
		set(model.StateFailed, model.CodeAgentUnsafeMode, s.adapterMessage(res.unsafe))
	case res.unsafe != "":
		set(model.StateFailed, model.CodeAgentUnsafeMode, s.unsafeMessage(res.unsafe, "before the prompt was sent"))
	case cause == causeUnsafeMode:
		s.mu.Lock()
		why := s.unsafeWhy
		s.mu.Unlock()
		set(model.StateFailed, model.CodeAgentUnsafeMode, s.unsafeMessage(why, "during the run, at once"))
	case cause == causeStartTimeout:
		set(model.StateFailed, model.CodeAgentStartTimeout, s.startTimeoutMessage(stopStage))
	case cause == causeProtocol:
		set(model.StateFailed, model.CodeAgentCrashed,
			fmt.Sprintf("the agent wrote %s on its stdout during %s and was killed; see the task log", garbage, stopStage))
	case res.resp != nil && !(res.resp.StopReason == acp.StopReasonCancelled && cause != causeNone):
		out.Result.StopReason = string(res.resp.StopReason)
		set(s.byStopReason(res.resp.StopReason))
	case cause != causeNone:
		if res.resp != nil {
			out.Result.StopReason = string(res.resp.StopReason)
		}
		set(s.byStop(cause, stopStage, graceKill))
	case res.startErr != nil:
		set(model.StateFailed, model.CodeDispatchFailed, "the run could not be marked working: "+model.Public(res.startErr).Message)
	case isAuthRequired(res.err):
		set(model.StateFailed, model.CodeAgentAuthRequired, authMessage(s.agent, res.stage, s.d.o.Autostarted))
	case res.disconnected:
		set(model.StateFailed, model.CodeAgentCrashed, fmt.Sprintf("the connection to the agent closed during %s (agent process: %s); see the task log", res.stage, exit))
	case res.stage == stagePrompt:
		set(model.StateFailed, model.CodeAgentCrashed, fmt.Sprintf("the agent answered session/prompt with an error: %s", errText(res.err)))
	default:
		set(model.StateFailed, model.CodeDispatchFailed, fmt.Sprintf("the ACP session could not be set up: %s failed: %s", res.stage, errText(res.err)))
	}
	if f := model.ToolFailuresOf(result.ToolCalls); f != nil && f.All && out.State == model.StateCompleted {
		note = strings.TrimPrefix(note+"; "+f.Summary, "; ")
	}
	switch out.Code {
	case model.CodeDispatchFailed, model.CodeAgentCrashed, model.CodeAgentRefused, model.CodeAgentAuthRequired, model.CodeAgentStartTimeout:
		if tail := s.tail.Tail(); tail != "" {
			out.Message += "; the agent's stderr ended with: " + tail
		}
	}
	if note != "" {
		if out.Message == "" {
			out.Message = note
		} else {
			out.Message += "; " + note
		}
	}
	return out
}

// byStopReason is the outcome of a turn the agent ended by itself, by its
// stop reason.
func (s *session) byStopReason(r acp.StopReason) (model.State, model.Code, string) {
	switch r {
	case acp.StopReasonEndTurn:
		return model.StateCompleted, "", ""
	case acp.StopReasonRefusal:
		return model.StateFailed, model.CodeAgentRefused, "the agent refused (stop reason refusal)"
	case acp.StopReasonMaxTokens:
		return model.StateFailed, model.CodeAgentMaxTokens, "the agent hit its token limit (stop reason max_tokens)"
	case acp.StopReasonMaxTurnRequests:
		return model.StateFailed, model.CodeAgentMaxTurnRequests, "the agent hit its turn request limit (stop reason max_turn_requests)"
	case acp.StopReasonCancelled:
		if n := s.client.denied(); n > 0 {
			// Codex's only reject option aborts the turn.
			return model.StateFailed, model.CodeAgentRefused, fmt.Sprintf(
				"the agent ended its turn (stop reason cancelled) after the relay denied %d permission request(s)", n)
		}
		return model.StateFailed, model.CodeAgentCrashed, "the agent ended its turn as cancelled, but the relay did not cancel it"
	}
	return model.StateFailed, model.CodeAgentCrashed, fmt.Sprintf("the agent ended its turn with an unknown stop reason %q", r)
}

// byStop is the outcome of a run the relay stopped (a cancel, the task's
// timeout, the dispatcher's stop), saying how.
func (s *session) byStop(cause stopCause, stopStage stage, graceKill bool) (model.State, model.Code, string) {
	how := "session/cancel was sent"
	switch {
	case stopStage != stagePrompt && stopStage != stageStart:
		how = "the agent was stopped during " + string(stopStage)
	case graceKill:
		how = fmt.Sprintf("session/cancel was sent and, the turn not ending within %s, the agent was killed", s.d.o.CancelGrace)
	}
	switch cause {
	case causeCancel:
		return model.StateCanceled, model.CodeCanceledBySubmitter, "canceled; " + how
	case causeTimeout:
		return model.StateFailed, model.CodeTaskTimeout, fmt.Sprintf("the task ran longer than %s; %s", s.timeout, how)
	}
	return model.StateFailed, model.CodeDispatchInterrupted, "the relay dispatcher stopped during the run; " + how
}

// unsafeMessage is an agent_unsafe_mode task's message when the session
// was, or went, in a mode the profile does not accept. A mode the adapter
// does not offer at all is the adapter's doing; any other, most likely the
// user's settings (a default mode, an approval mode).
func (s *session) unsafeMessage(why, when string) string {
	name := "its hardening profile"
	if s.profile != nil {
		name = "the " + s.profile.Name + " hardening profile"
	}
	hint := "Check the agent's own settings (a default mode or approval mode) and `relay agents`"
	if strings.Contains(why, "does not offer session mode") || strings.Contains(why, "reports no session mode") {
		hint = fmt.Sprintf("The cause is the adapter (%s), not your settings: install a version its profile was verified on (%s) and run `relay agents verify %s`",
			s.runningAdapter(), strings.Join(s.profile.VerifiedOn, ", "), s.agent)
	}
	return fmt.Sprintf("%s: %s, which %s does not accept for %s tasks; the agent was stopped %s (adapter %s). %s",
		s.agent, why, name, s.mode, when, s.runningAdapter(), hint)
}

// adapterMessage is an agent_unsafe_mode task's message when the adapter
// itself is the cause: no profile covers its generation, or what runs is
// not what is installed.
func (s *session) adapterMessage(why string) string {
	return fmt.Sprintf("%s: refused before any prompt: %s. The cause is the adapter, not your settings; `relay agents` shows what is installed and which generations the profiles cover",
		s.agent, why)
}

// runningAdapter names the adapter running: as it reported itself at
// initialize, else as found on disk.
func (s *session) runningAdapter() string {
	s.mu.Lock()
	info := s.agentInfo
	s.mu.Unlock()
	if info != nil && info.Name != "" {
		return strings.TrimSpace(info.Name + " " + info.Version)
	}
	return s.adapter.Describe()
}

func isAuthRequired(err error) bool {
	var re *acp.RequestError
	return errors.As(err, &re) && re.Code == authRequiredCode
}

// errText renders an error for a task message, bounded.
func errText(err error) string {
	if err == nil {
		return "no error"
	}
	msg := err.Error()
	var re *acp.RequestError
	if errors.As(err, &re) {
		msg = fmt.Sprintf("code %d %s", re.Code, re.Message)
		if d := dataText(re.Data); d != "" {
			msg += ": " + d
		}
	}
	const max = 300
	if len(msg) > max {
		msg = msg[:max] + "…"
	}
	return msg
}

// dataText renders a JSON-RPC error's data for a task message: the
// agent's own words where it gives them (details, error, message), else the
// data as JSON; never Go's map syntax.
func dataText(data any) string {
	if data == nil {
		return ""
	}
	if m, ok := data.(map[string]any); ok {
		var parts []string
		for _, k := range []string{"details", "error", "message"} {
			if v, ok := m[k].(string); ok && v != "" {
				parts = append(parts, sanitizeLine(v))
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	if s, ok := data.(string); ok {
		return sanitizeLine(s)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return ""
	}
	return sanitizeLine(string(b))
}

// loginHint is the agent's own login command, for auth_required.
func loginHint(agent string) string {
	switch agent {
	case "claude":
		return "run `claude /login`"
	case "codex":
		return "run `codex login`"
	case "gemini":
		return "run `gemini` and log in"
	default:
		return "run " + agent + "'s own login"
	}
}

func authMessage(agent string, st stage, autostarted bool) string {
	msg := fmt.Sprintf("%s needs its user to log in (auth_required at %s); %s, then retry — the relay never authenticates for an agent",
		agent, st, loginHint(agent))
	if autostarted {
		msg += "; this daemon was started by a facade, with an allow-listed environment: if " + agent +
			" logs in with an API key from the environment, put it in [daemon] env in config.toml, or start the daemon by hand (`relay daemon status` shows its environment)"
	}
	return msg
}

// promptBlocks is the prompt text followed by one resource link per
// artifact (references, never content).
func promptBlocks(text string, arts []model.Artifact) []acp.ContentBlock {
	blocks := []acp.ContentBlock{acp.TextBlock(text)}
	for _, a := range arts {
		name := a.Name
		if name == "" {
			name = a.URI
			if i := strings.LastIndexByte(strings.TrimRight(name, "/"), '/'); i >= 0 {
				name = strings.TrimRight(name, "/")[i+1:]
			}
		}
		b := acp.ResourceLinkBlock(name, a.URI)
		if a.MediaType != "" {
			mt := a.MediaType
			b.ResourceLink.MimeType = &mt
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// heldReader reads r once ready is closed.
type heldReader struct {
	r     io.Reader
	ready <-chan struct{}
}

func (h heldReader) Read(b []byte) (int, error) {
	<-h.ready
	return h.r.Read(b)
}
