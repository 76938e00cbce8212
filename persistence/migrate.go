package persistence

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered schema change, embedded from
// migrations/NNNN_name.sql.
type Migration struct {
	// Version is the file's number; versions run 1, 2, 3… without gaps.
	Version int
	// Name is the part of the file name between the number and ".sql".
	Name string
	// SQL is the file's content, run as one script.
	SQL string
}

// migrationName matches migrations/NNNN_name.sql.
var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations parses the embedded files once.
var loadMigrations = sync.OnceValues(func() ([]Migration, error) {
	return parseMigrations(migrationFiles, "migrations")
})

// embeddedMigrations returns a copy of the embedded migrations.
func embeddedMigrations() ([]Migration, error) {
	migs, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	return append([]Migration(nil), migs...), nil
}

// parseMigrations reads dir in fsys: every entry must be NNNN_name.sql and
// the versions must be 1..n.
func parseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("persistence: migrations: %w", err)
	}
	var migs []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("persistence: migrations: %q is not named NNNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("persistence: migrations: %w", err)
		}
		migs = append(migs, Migration{Version: v, Name: m[2], SQL: string(body)})
	}
	if err := checkMigrations(migs); err != nil {
		return nil, err
	}
	return migs, nil
}

// checkMigrations sorts migs and requires versions 1..n.
func checkMigrations(migs []Migration) error {
	sort.Slice(migs, func(i, j int) bool { return migs[i].Version < migs[j].Version })
	if len(migs) == 0 {
		return fmt.Errorf("persistence: migrations: none")
	}
	for i, m := range migs {
		if m.Version != i+1 {
			return fmt.Errorf("persistence: migrations: expected version %d, found %04d_%s", i+1, m.Version, m.Name)
		}
	}
	return nil
}

// createMigrationsTable is the bookkeeping table; it is not a migration.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
)`

// migrate applies the migrations in migs that are missing from the
// database, up to version upTo (0: all). Each runs in its own transaction
// with its schema_migrations row, so a failure leaves it unrecorded and the
// schema as the previous migration left it.
func migrate(ctx context.Context, w *bun.DB, migs []Migration, upTo int, clock func() time.Time) error {
	if err := checkMigrations(migs); err != nil {
		return err
	}
	if _, err := w.DB.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	applied, err := appliedMigrations(ctx, w.DB)
	if err != nil {
		return err
	}
	for i, a := range applied {
		if a.Version != i+1 {
			return fmt.Errorf("migrations: applied versions are not 1..%d: found %d", len(applied), a.Version)
		}
		if a.Version > len(migs) {
			return fmt.Errorf("migrations: the database is at schema version %d, newer than this relay (%d); use a newer relay",
				applied[len(applied)-1].Version, len(migs))
		}
		if want := migs[i].Name; a.Name != want {
			return fmt.Errorf("migrations: version %d is recorded as %q, but this relay's is %q", a.Version, a.Name, want)
		}
	}
	for _, m := range migs[len(applied):] {
		if upTo > 0 && m.Version > upTo {
			break
		}
		if err := applyMigration(ctx, w, m, clock); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration runs one migration and records it, in one transaction.
// The bookkeeping goes through bun's builder as it is: its values (a
// version, a migration's name, a time) are safe to format into the text.
func applyMigration(ctx context.Context, w *bun.DB, m Migration, clock func() time.Time) error {
	err := w.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// Another process may have applied it since we looked: the
		// IMMEDIATE transaction holds the write lock, so re-check here.
		n, err := tx.NewSelect().Model((*schemaMigrationRow)(nil)).Where("version = ?", m.Version).Count(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.Tx.ExecContext(ctx, m.SQL); err != nil {
			return err
		}
		_, err = tx.NewInsert().Model(&schemaMigrationRow{Version: m.Version, Name: m.Name, AppliedAt: formatTime(clock())}).
			Returning("NULL").Exec(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return nil
}

// appliedMigrations lists schema_migrations in version order.
func appliedMigrations(ctx context.Context, q *sql.DB) ([]schemaMigrationRow, error) {
	var out []schemaMigrationRow
	if err := sqlgen().NewSelect().Conn(q).Model(&out).Order("version").Scan(ctx); err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return out, nil
}

// schemaVersion returns the highest applied version (0 for none).
func schemaVersion(ctx context.Context, q *sql.DB) (int, error) {
	var v int
	err := sqlgen().NewSelect().Conn(q).Model((*schemaMigrationRow)(nil)).ColumnExpr("IFNULL(MAX(version), 0)").Scan(ctx, &v)
	if err != nil {
		return 0, fmt.Errorf("persistence: schema version: %w", err)
	}
	return v, nil
}
