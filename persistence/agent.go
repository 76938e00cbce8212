package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hai-relay/relay/model"
)

// Probe is the stored result of an agent's last bounded live invocation
// (relay agents probe NAME): the worked_live signal with its when and why.
// configured and enabled are not stored; they are computed from the
// configuration and PATH each time.
type Probe struct {
	Name       string
	WorkedLive bool
	// At is when the probe ran.
	At     time.Time
	Reason string
	// Fingerprint is the adapter's the probe ran on ("" when not known).
	Fingerprint string
}

// RecordProbe stores p as name's latest probe result and audits it
// ("agent.probe"), in one transaction. A zero At is stamped with the clock.
func (db *DB) RecordProbe(ctx context.Context, p Probe) error {
	if p.Name == "" {
		return model.InvalidArgs("probe without an agent name")
	}
	var err error
	if p.At, err = stamp("probe time", p.At, db.now); err != nil {
		return err
	}
	now := db.now()
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		at := formatTime(p.At)
		row := agentRow{Name: p.Name, WorkedLive: p.WorkedLive, WorkedLiveAt: &at, WorkedLiveReason: p.Reason,
			UpdatedAt: formatTime(now), Fingerprint: p.Fingerprint}
		if _, err := w.ExecContext(ctx, qProbeUpsert, probeBind.args(&row)...); err != nil {
			return err
		}
		return w.audit(ctx, model.AuditEvent{At: now, Kind: "agent.probe", Actor: model.RelayAgent,
			Data: auditData{"agent": p.Name, "worked_live": strconv.FormatBool(p.WorkedLive),
				"probed_at": formatTime(p.At)}.set("reason", p.Reason)})
	})
	return wrap("record probe", err)
}

// Probes returns every agent's latest probe result, by name.
func (db *DB) Probes(ctx context.Context) ([]Probe, error) {
	var rows []agentRow
	if err := db.scanAll(ctx, &rows, qProbes); err != nil {
		return nil, wrap("probes", err)
	}
	var out []Probe
	for _, r := range rows {
		p := Probe{Name: r.Name, WorkedLive: r.WorkedLive, Reason: r.WorkedLiveReason, Fingerprint: r.Fingerprint}
		if r.WorkedLiveAt != nil {
			var err error
			if p.At, err = parseTime(*r.WorkedLiveAt); err != nil {
				return nil, wrap("probes", fmt.Errorf("agent %s: worked_live_at: %w", p.Name, err))
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// RecordVerification stores v as its agent's latest hardening verification
// (relay agents verify NAME), attempts included, and audits it
// ("agent.verify"), in one transaction. A zero At is stamped with the
// clock.
func (db *DB) RecordVerification(ctx context.Context, v model.Verification) error {
	if v.Agent == "" {
		return model.InvalidArgs("verification without an agent name")
	}
	if !slices.Contains(model.AllHardeningStatuses(), v.Status) {
		return model.InvalidArgs("verification status %q is not one of %v", v.Status, model.AllHardeningStatuses())
	}
	var err error
	if v.At, err = stamp("verification time", v.At, db.now); err != nil {
		return err
	}
	attempts := v.Attempts
	if attempts == nil {
		attempts = []model.VerifyAttempt{}
	}
	js, err := json.Marshal(attempts)
	if err != nil {
		return wrap("record verification", err)
	}
	now := db.now()
	stops := map[model.Stop]int{}
	controls := map[bool]int{}
	for _, a := range attempts {
		if a.Control {
			controls[a.Passed]++
			continue
		}
		stops[a.StoppedBy]++
	}
	data := auditData{"agent": v.Agent, "status": string(v.Status), "verified_at": formatTime(v.At),
		"attempts": strconv.Itoa(len(attempts))}
	for _, st := range model.AllStops() {
		if n := stops[st]; n > 0 {
			data["stopped."+string(st)] = strconv.Itoa(n)
		}
	}
	if n := controls[true]; n > 0 {
		data["control.passed"] = strconv.Itoa(n)
	}
	if n := controls[false]; n > 0 {
		data["control.failed"] = strconv.Itoa(n)
	}
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		row := agentVerificationRow{Name: v.Agent, Status: string(v.Status), VerifiedAt: formatTime(v.At),
			AdapterVersion: v.AdapterVersion, AdapterPackage: v.AdapterPackage, AdapterPath: v.AdapterPath,
			Fingerprint: v.Fingerprint, Profile: v.Profile, Reason: v.Reason, Attempts: string(js),
			UpdatedAt: formatTime(now)}
		if _, err := w.ExecContext(ctx, qVerificationUpsert, verificationBind.args(&row)...); err != nil {
			return err
		}
		return w.audit(ctx, model.AuditEvent{At: now, Kind: "agent.verify", Actor: model.RelayAgent,
			Data: data.set("adapter_version", v.AdapterVersion).set("adapter_package", v.AdapterPackage).
				set("fingerprint", v.Fingerprint).set("profile", v.Profile).set("reason", v.Reason)})
	})
	return wrap("record verification", err)
}

// Verifications returns every agent's latest hardening verification, by
// name.
func (db *DB) Verifications(ctx context.Context) ([]model.Verification, error) {
	var rows []agentVerificationRow
	if err := db.scanAll(ctx, &rows, qVerifications); err != nil {
		return nil, wrap("verifications", err)
	}
	var out []model.Verification
	for _, r := range rows {
		v := model.Verification{Agent: r.Name, Status: model.HardeningStatus(r.Status), AdapterVersion: r.AdapterVersion,
			AdapterPackage: r.AdapterPackage, AdapterPath: r.AdapterPath, Fingerprint: r.Fingerprint,
			Profile: r.Profile, Reason: r.Reason}
		var err error
		if v.At, err = parseTime(r.VerifiedAt); err != nil {
			return nil, wrap("verifications", fmt.Errorf("agent %s: verified_at: %w", v.Agent, err))
		}
		if err := json.Unmarshal([]byte(r.Attempts), &v.Attempts); err != nil {
			return nil, wrap("verifications", fmt.Errorf("agent %s: attempts: %w", v.Agent, err))
		}
		out = append(out, v)
	}
	return out, nil
}
