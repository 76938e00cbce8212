package persistence

import (
	"context"
	"database/sql"
	"fmt"
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
