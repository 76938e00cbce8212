package persistence

import (
	"context"
	"database/sql"
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
}

// RecordProbe stores p as name's latest probe result and audits it
// ("agent.probe"), in one transaction. A zero At is stamped with the clock.
func (db *DB) RecordProbe(ctx context.Context, p Probe) error {
	if p.Name == "" {
		return invalidArgs("probe without an agent name")
	}
	var err error
	if p.At, err = stamp("probe time", p.At, db.now); err != nil {
		return err
	}
	now := db.now()
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		_, err := w.ExecContext(ctx, `INSERT INTO agents (name, worked_live, worked_live_at, worked_live_reason, updated_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET worked_live = excluded.worked_live,
				worked_live_at = excluded.worked_live_at, worked_live_reason = excluded.worked_live_reason,
				updated_at = excluded.updated_at`,
			p.Name, p.WorkedLive, formatTime(p.At), p.Reason, formatTime(now))
		if err != nil {
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
	rows, err := db.reader.DB.QueryContext(ctx, `SELECT name, worked_live, worked_live_at, worked_live_reason
		FROM agents ORDER BY name`)
	if err != nil {
		return nil, wrap("probes", err)
	}
	defer rows.Close()
	var out []Probe
	for rows.Next() {
		var p Probe
		var at sql.NullString
		if err := rows.Scan(&p.Name, &p.WorkedLive, &at, &p.Reason); err != nil {
			return nil, wrap("probes", err)
		}
		if at.Valid {
			if p.At, err = parseTime(at.String); err != nil {
				return nil, wrap("probes", fmt.Errorf("agent %s: worked_live_at: %w", p.Name, err))
			}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("probes", err)
	}
	return out, nil
}

// RecordVerification stores v as its agent's latest hardening verification
// (relay agents verify NAME), attempts included, and audits it
// ("agent.verify"), in one transaction. A zero At is stamped with the
// clock.
func (db *DB) RecordVerification(ctx context.Context, v model.Verification) error {
	if v.Agent == "" {
		return invalidArgs("verification without an agent name")
	}
	if !slices.Contains(model.AllHardeningStatuses(), v.Status) {
		return invalidArgs("verification status %q is not one of %v", v.Status, model.AllHardeningStatuses())
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
	for _, a := range attempts {
		stops[a.StoppedBy]++
	}
	data := auditData{"agent": v.Agent, "status": string(v.Status), "verified_at": formatTime(v.At),
		"attempts": strconv.Itoa(len(attempts))}
	for _, st := range model.AllStops() {
		if n := stops[st]; n > 0 {
			data["stopped."+string(st)] = strconv.Itoa(n)
		}
	}
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		_, err := w.ExecContext(ctx, `INSERT INTO agent_verifications (name, status, verified_at, adapter_version, profile,
				reason, attempts, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET status = excluded.status, verified_at = excluded.verified_at,
				adapter_version = excluded.adapter_version, profile = excluded.profile, reason = excluded.reason,
				attempts = excluded.attempts, updated_at = excluded.updated_at`,
			v.Agent, string(v.Status), formatTime(v.At), v.AdapterVersion, v.Profile, v.Reason, string(js), formatTime(now))
		if err != nil {
			return err
		}
		return w.audit(ctx, model.AuditEvent{At: now, Kind: "agent.verify", Actor: model.RelayAgent,
			Data: data.set("adapter_version", v.AdapterVersion).set("profile", v.Profile).set("reason", v.Reason)})
	})
	return wrap("record verification", err)
}

// Verifications returns every agent's latest hardening verification, by
// name.
func (db *DB) Verifications(ctx context.Context) ([]model.Verification, error) {
	rows, err := db.reader.DB.QueryContext(ctx, `SELECT name, status, verified_at, adapter_version, profile, reason, attempts
		FROM agent_verifications ORDER BY name`)
	if err != nil {
		return nil, wrap("verifications", err)
	}
	defer rows.Close()
	var out []model.Verification
	for rows.Next() {
		var v model.Verification
		var at, attempts string
		if err := rows.Scan(&v.Agent, &v.Status, &at, &v.AdapterVersion, &v.Profile, &v.Reason, &attempts); err != nil {
			return nil, wrap("verifications", err)
		}
		if v.At, err = parseTime(at); err != nil {
			return nil, wrap("verifications", fmt.Errorf("agent %s: verified_at: %w", v.Agent, err))
		}
		if err := json.Unmarshal([]byte(attempts), &v.Attempts); err != nil {
			return nil, wrap("verifications", fmt.Errorf("agent %s: attempts: %w", v.Agent, err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("verifications", err)
	}
	return out, nil
}
