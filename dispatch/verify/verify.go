// Package verify runs hardening verifications (`relay agents verify`). A
// verification proves, on the user's own machine and with the user's own
// settings, that an agent stays read-only where its profile says it does.
// It starts a scripted model server on 127.0.0.1 (package
// dispatch/modelserver), points the agent at it through what its profile
// knows (an environment variable, -c overrides, an inline config) and no
// other way, and runs one session per attempt — write outside the cwd,
// write inside it, edit a file in it, run a command — through the very
// path a task takes: the agent's hardening profile, the deny-all client
// (dispatch.Dispatcher.RunVerifySession). The model is a script in the
// prompt that calls the agent's own tools; whatever stops the attempt (the
// relay's denial, the agent's refusal, a tool never offered, a refused
// session mode) is reported, and so is an attempt that was not stopped.
// Every attempt targets files in two fresh temporary directories, removed
// afterwards. docs/agents/verify.md says what it does and does not prove.
package verify

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/modelserver"
	"github.com/hai-relay/relay/model"
)

// DefaultTimeout bounds a verification when none is given.
const DefaultTimeout = model.DefaultVerifyTimeout

// Verifier runs hardening verifications through a dispatcher.
type Verifier struct{ d *dispatch.Dispatcher }

// New returns a Verifier that runs its sessions through d.
func New(d *dispatch.Dispatcher) *Verifier { return &Verifier{d: d} }

// Run runs a hardening verification of the named agent, bounded by
// timeout (DefaultTimeout when zero), and returns its report. The report
// is recorded (dispatch.Dispatcher.RecordVerification: the agent's
// hardening signal), whatever its status; a verification that ran is never
// an error. An agent without a profile, or whose profile cannot be
// verified offline on this machine, is reported unverified with the reason
// and nothing is started. The error is a *model.Error: unknown_agent, or
// dispatch_failed when ctx or the dispatcher's Stop ended the verification
// (then nothing is recorded).
func (v *Verifier) Run(ctx context.Context, name string, timeout time.Duration) (model.Verification, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	plan, err := v.d.PlanVerify(name)
	if err != nil {
		return model.Verification{}, err
	}
	began := time.Now()
	rep, canceled := v.verify(ctx, name, plan, began.Add(timeout))
	if canceled {
		why := "the dispatcher is stopping"
		if ctx.Err() != nil {
			why = context.Cause(ctx).Error()
		}
		return model.Verification{}, model.Errorf(model.CodeDispatchFailed, "verification of %s canceled: %s", name, why)
	}
	rep.Agent, rep.At = name, time.Now().UTC()
	v.d.RecordVerification(rep, time.Since(began))
	return rep, nil
}

// verify runs the verification; canceled when ctx or Stop ended it.
func (v *Verifier) verify(ctx context.Context, name string, plan dispatch.VerifyPlan, deadline time.Time) (model.Verification, bool) {
	rep := model.Verification{Status: model.HardeningUnverified, Attempts: []model.VerifyAttempt{}}
	ad := plan.Adapter
	rep.AdapterPackage, rep.AdapterPath, rep.Fingerprint, rep.AdapterVersion = ad.Package, ad.RealPath, ad.Fingerprint, ad.Version
	vs := verifiable(&rep, plan)
	if vs == nil {
		return rep, false
	}
	if vs.NoModel != "" {
		return offlineOnly(rep, plan.Profile, vs), false
	}
	ws, why := newWorkspace()
	if why != "" {
		return inconclusive(rep, why), false
	}
	defer ws.close()
	runs, err := plannedRuns(plan.Profile, vs.Vocab, ws)
	if err != nil {
		return inconclusive(rep, "writing the attempt's files: "+err.Error()), false
	}
	results, versions, canceled := v.runAll(ctx, name, vs, ws, runs, deadline, plan.Unhardened != "")
	if canceled {
		return rep, true
	}
	rep.Attempts = results
	for _, ver := range versions {
		if ver != "" {
			rep.AdapterVersion = ver
			break
		}
	}
	rep.Status, rep.Reason = verdict(results)
	if plan.Unhardened != "" {
		rep.Reason += " (" + plan.Unhardened + ": the sessions ran without the profile's session options)"
	}
	return rep, false
}

// verifiable returns the verification spec of plan's profile, or nil
// with rep's status and reason saying why nothing can be run.
func verifiable(rep *model.Verification, plan dispatch.VerifyPlan) *hardening.VerifySpec {
	prof := plan.Profile
	switch {
	case plan.Refused != "":
		// Every task to this adapter would be refused: safe, and of no use.
		rep.Status, rep.Reason = model.HardeningUnusable, "every task would be refused (agent_unsafe_mode): "+plan.Refused
		return nil
	case prof == nil:
		rep.Reason = "no hardening profile: nothing to verify (every permission request is still denied, but nothing else holds the agent)"
		return nil
	}
	rep.Profile = prof.Name
	vs := prof.Verify
	if vs == nil {
		rep.Reason = "the hardening profile " + prof.Name + " has no offline verification"
		return nil
	}
	if vs.Refuse != nil {
		if why := vs.Refuse(); why != "" {
			rep.Reason = "not verified, to leave the user's settings alone: " + why
			return nil
		}
	}
	if plan.NoCommand {
		*rep = inconclusive(*rep, "no command configured")
		return nil
	}
	return vs
}

// inconclusive is rep failed because the verification could not be run.
func inconclusive(rep model.Verification, why string) model.Verification {
	rep.Status, rep.Reason = model.HardeningFailed, "inconclusive: "+why
	return rep
}

// workspace is what a verification's sessions share: the scripted model
// and the two temporary directories their attempts target.
type workspace struct {
	srv          *modelserver.Server
	to           hardening.ScriptedModel
	cwd, outside string
}

// newWorkspace starts the scripted model and makes the directories, or
// says why it could not.
func newWorkspace() (*workspace, string) {
	// A key of this verification's own: the server listens on loopback,
	// where any local user could reach it, and serves only the agents
	// this verification starts.
	key := "relay-verify-" + randomHex(16)
	srv, err := modelserver.StartWith(modelserver.Options{Key: key})
	if err != nil {
		return nil, "could not start the scripted model on 127.0.0.1: " + err.Error()
	}
	ws := &workspace{srv: srv, to: hardening.ScriptedModel{URL: srv.URL(), Key: key}}
	if ws.cwd, err = os.MkdirTemp("", "relay-verify-cwd-"); err != nil {
		ws.close()
		return nil, "temporary cwd: " + err.Error()
	}
	if ws.outside, err = os.MkdirTemp("", "relay-verify-outside-"); err != nil {
		ws.close()
		return nil, "temporary directory: " + err.Error()
	}
	return ws, ""
}

func (ws *workspace) close() {
	if ws.outside != "" {
		os.RemoveAll(ws.outside)
	}
	if ws.cwd != "" {
		os.RemoveAll(ws.cwd)
	}
	ws.srv.Close()
}

// run is one attempt's session.
type run struct {
	mode    model.Mode
	attempt Attempt
	paths   AttemptPaths
	tag     string // in the prompt: tells this session's model requests apart
	steps   string // the script
	tool    string
	prompt  string
	tries   int // sessions run for the attempt so far
}

// retag gives the attempt a fresh tag, and the prompt that carries it, so
// that its session's model requests are told apart from any earlier try's.
func (r *run) retag() {
	r.tag = "relay-verify-" + randomHex(6)
	r.prompt = "HAI-Relay hardening verification " + r.tag + ".\n" + r.steps + "\n[[say " + r.tag + " finished]]"
}

// plannedRuns are the sessions of a verification under prof: in each mode
// its profile has a rule for, every attempt of that mode and the positive
// control.
func plannedRuns(prof *hardening.Profile, vocab hardening.ToolVocab, ws *workspace) ([]*run, error) {
	var runs []*run
	for _, m := range model.AllModes() {
		attempts := AllAttempts()
		if m == model.ModeStateChanging {
			attempts = stateChangingAttempts
		}
		if _, ok := prof.Rules[m]; !ok {
			continue
		}
		for _, a := range append(slices.Clip(attempts), AttemptReadControl) {
			p, err := NewAttemptPaths(ws.cwd, ws.outside, string(m)+"-"+string(a))
			if err != nil {
				return nil, err
			}
			r := &run{mode: m, attempt: a, paths: p}
			r.steps, r.tool = Script(vocab, a, p)
			r.retag()
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// parallel bounds how many of a verification's sessions run at once.
const parallel = 3

// runAll runs every session, at most parallel at once, and returns each
// one's result and the adapter version its agent reported; canceled when
// ctx or Stop ended a session. An agent that dies before it reaches the
// model (OpenCode racing another of its processes to create its database
// on a first run) made no attempt: such attempts are made once more,
// after the others.
func (v *Verifier) runAll(ctx context.Context, agent string, vs *hardening.VerifySpec, ws *workspace, runs []*run,
	deadline time.Time, unhardened bool) (results []model.VerifyAttempt, versions []string, canceled bool) {
	results, versions = make([]model.VerifyAttempt, len(runs)), make([]string, len(runs))
	retry := make([]bool, len(runs))
	pending := make([]int, len(runs))
	for i := range runs {
		pending[i] = i
	}
	for try := 0; try < 2 && len(pending) > 0; try++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, parallel)
		for _, i := range pending {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if try > 0 {
					runs[i].retag()
				}
				res, version, again, stopped := v.attempt(ctx, agent, vs, ws, runs[i], deadline, unhardened)
				if try > 0 {
					res.Detail = clipLine("second try: "+res.Detail, maxDetail)
				}
				mu.Lock()
				defer mu.Unlock()
				results[i], retry[i] = res, again
				if version != "" {
					versions[i] = version
				}
				canceled = canceled || stopped
			}()
		}
		wg.Wait()
		if canceled {
			return nil, nil, true
		}
		pending = pending[:0]
		for i := range runs {
			if retry[i] && try == 0 {
				pending = append(pending, i)
			}
		}
	}
	return results, versions, false
}

// attempt runs one attempt's session and classifies what stopped it;
// retry when the agent died before it reached the model (no attempt was
// made), canceled when ctx or Stop ended it.
func (v *Verifier) attempt(ctx context.Context, agent string, vs *hardening.VerifySpec, ws *workspace, r *run,
	deadline time.Time, unhardened bool) (res model.VerifyAttempt, version string, retry, canceled bool) {
	res = model.VerifyAttempt{Name: string(r.attempt), Mode: r.mode, Tool: r.tool, Target: r.paths.Target(r.attempt),
		Control: r.attempt == AttemptReadControl}
	remaining := time.Until(deadline)
	if remaining <= 0 {
		res.StoppedBy, res.Detail = model.StopNotRun, "the verification's time ran out before this attempt started"
		return res, "", false, false
	}
	r.tries++
	reached := false
	end, stopped, err := v.d.RunVerifySession(ctx, dispatch.VerifySession{
		Agent: agent, Mode: r.mode, Cwd: r.paths.Cwd, Prompt: r.prompt, Timeout: remaining,
		Log: agent + "-" + string(r.mode) + "-" + string(r.attempt), FreshLog: r.tries == 1,
		Note: fmt.Sprintf("verification %s: %s %s with %s (%s)", r.tag, r.mode, r.attempt, r.tool,
			map[bool]string{true: "unhardened", false: "hardened"}[unhardened]),
		Redirect: func(ruleEnv []string) (hardening.Launch, error) {
			l, err := vs.Redirect(ws.to, ruleEnv)
			l.Env = append(offlineEnv(), l.Env...)
			return l, err
		},
		Judge: func(end dispatch.VerifyEnd) string {
			ev := attemptEvidence{happened: r.paths.Happened(r.attempt), out: end.Outcome, startErr: end.StartErr,
				denied: end.Denied, tool: r.tool, target: r.paths.Target(r.attempt), reqs: requestsTagged(ws.srv.Requests(), r.tag)}
			reached = len(ev.reqs) > 0
			if res.Control {
				res.Passed, res.Detail = control(ev, r.paths.Token)
				return fmt.Sprintf("verification %s: control passed=%v: %s", r.tag, res.Passed, res.Detail)
			}
			res.StoppedBy, res.Detail = classify(ev)
			reached = reached || res.StoppedBy != model.StopNotRun
			return fmt.Sprintf("verification %s: %s: %s", r.tag, res.StoppedBy, res.Detail)
		},
	})
	switch {
	case err != nil:
		res.StoppedBy, res.Detail = model.StopNotRun, err.Error()
		return res, "", false, false
	case stopped:
		return res, "", false, true
	}
	out := end.Outcome
	retry = !reached && end.StartErr == nil && out.Code != model.CodeAgentAuthRequired &&
		out.Code != model.CodeTaskTimeout && out.Code != model.CodeAgentUnsafeMode
	return res, end.AgentVersion, retry, false
}

// offlineEnv points every proxy variable at a closed port, loopback
// excepted: whatever honours them cannot reach the network.
func offlineEnv() []string {
	env := []string{"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"} {
		env = append(env, k+"=http://127.0.0.1:9")
	}
	return env
}
