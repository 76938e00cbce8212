package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hai-relay/relay/model"
)

// ProbePrompt is the one-line prompt of a live probe.
const ProbePrompt = "Reply with the single word OK."

// Probe runs a bounded live invocation of the named agent with the same
// deny-all client, read_only, in a temporary cwd: spawn → initialize →
// session/new → one prompt that must end with end_turn within timeout
// (DefaultProbeTimeout when zero). The outcome is recorded in the registry
// (and passed to Options.OnProbe) and the agent's entry returned. On
// failure the error is a *model.Error (dispatch_failed, or
// agent_auth_required) whose message, like the recorded reason, names the
// stage: spawn, initialize, auth required, session/new, prompt or timeout.
// A probe canceled through ctx records nothing.
func (d *Dispatcher) Probe(ctx context.Context, name string, timeout time.Duration) (model.AgentInfo, error) {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	spec, ok := d.o.Registry.Spec(name)
	if !ok {
		return model.AgentInfo{}, model.Errorf(model.CodeUnknownAgent, "no agent named %q", name)
	}
	began := time.Now()
	fp := d.o.Registry.adapter(spec).Fingerprint // the adapter the probe runs on
	reason, code, canceled := d.runProbe(ctx, spec, timeout)
	if canceled {
		why := "the dispatcher is stopping"
		if ctx.Err() != nil {
			why = context.Cause(ctx).Error()
		}
		return model.AgentInfo{}, model.Errorf(model.CodeDispatchFailed, "probe of %s canceled: %s", name, why)
	}
	p := Probe{OK: code == "", At: time.Now().UTC(), Reason: reason, Fingerprint: fp}
	if p.OK {
		p.Reason = fmt.Sprintf("end_turn in %s", time.Since(began).Round(time.Millisecond))
	}
	d.o.Registry.SetProbe(name, p)
	if d.o.OnProbe != nil {
		d.o.OnProbe(name, p)
	}
	d.log.Info("agent probed", "agent", name, "ok", p.OK, "reason", p.Reason)
	info, _ := d.o.Registry.Agent(ctx, name)
	if p.OK {
		return info, nil
	}
	return info, &model.Error{Code: code, Message: fmt.Sprintf("probe of %s failed at %s", name, reason),
		Hint: fmt.Sprintf("read %s", d.probeLogHint(name))}
}

func (d *Dispatcher) probeLogDir() string {
	if d.o.Home == "" {
		return ""
	}
	return filepath.Join(d.o.Home, "logs", "probes")
}

func (d *Dispatcher) probeLogHint(name string) string {
	if dir := d.probeLogDir(); dir != "" {
		return "the probe log " + filepath.Join(dir, name+".log")
	}
	return "the agent's own documentation"
}

// runProbe returns "" and "" on success, else the failure reason (it
// starts with the stage) and its code; canceled when ctx ended the probe.
func (d *Dispatcher) runProbe(ctx context.Context, spec AgentSpec, timeout time.Duration) (reason string, code model.Code, canceled bool) {
	failed := func(format string, args ...any) (string, model.Code, bool) {
		return fmt.Sprintf(format, args...), model.CodeDispatchFailed, false
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return failed("spawn: no command configured")
	}
	dir, err := os.MkdirTemp("", "relay-probe-")
	if err != nil {
		return failed("spawn: temporary cwd: %v", err)
	}
	defer os.RemoveAll(dir)
	lg, err := openLog(d.probeLogDir(), spec.Name, d.o.LogLimit, true)
	if err != nil {
		lg, _ = openLog("", "", d.o.LogLimit, false)
	}
	defer lg.Close()

	s := newSession(d, spec, "", model.ModeReadOnly, dir, promptBlocks(ProbePrompt, nil), timeout, lg)
	out, res, err, stopped := d.runBounded(ctx, s)
	if err != nil {
		return failed("spawn: %v", err)
	}
	cause, stopStage, _, _ := s.stopState()
	switch {
	case out.State == model.StateCompleted:
		return "", "", false
	case stopped:
		return "", "", true
	case cause == causeTimeout:
		return failed("timeout: no end_turn within %s (still in %s)", timeout, stopStage)
	case out.Code == model.CodeAgentAuthRequired:
		return fmt.Sprintf("auth required: at %s; %s, then probe again", res.stage, loginHint(spec.Name)), model.CodeAgentAuthRequired, false
	default:
		st := res.stage
		if st == stageSetMode {
			st = stageNewSession
		}
		return failed("%s: %s", st, out.Message)
	}
}
