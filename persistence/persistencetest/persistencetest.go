// Package persistencetest opens real SQLite databases for the tests of
// other packages (the engine's, for one): always a real file in the test's
// temporary directory, never a mock. It also holds what the benchmarks
// need of the store: Seed, months of synthetic history written through
// DB.Import, and InsertFloor, the plain-SQLite floor group commit is
// measured against. It is test-only: no product package imports it, so
// `testing` stays out of the relay binary (the dependency test in
// cmd/relay holds that).
package persistencetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hai-relay/relay/persistence"
)

// MustOpenTemp opens a fresh, migrated database in tb.TempDir() and closes
// it when the test ends.
func MustOpenTemp(tb testing.TB) *persistence.DB {
	tb.Helper()
	return MustOpen(tb, filepath.Join(tb.TempDir(), "relay.db"), persistence.Options{})
}

// MustOpen opens the database at path with opts, failing tb on error, and
// closes it when the test ends.
func MustOpen(tb testing.TB, path string, opts persistence.Options) *persistence.DB {
	tb.Helper()
	db, err := persistence.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("persistence: open %s: %v", path, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("persistence: close %s: %v", path, err)
		}
	})
	return db
}
