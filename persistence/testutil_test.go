package persistence

import (
	"context"
	"path/filepath"
	"testing"
)

// MustOpenTemp opens a fresh, migrated database in tb.TempDir() and closes
// it when the test ends: always a real SQLite file, never a mock. It serves
// this package's own tests; other packages use persistencetest, which this
// package's internal tests cannot import (an import cycle).
func MustOpenTemp(tb testing.TB) *DB {
	tb.Helper()
	return MustOpen(tb, filepath.Join(tb.TempDir(), "relay.db"), Options{})
}

// MustOpen opens the database at path with opts, failing tb on error, and
// closes it when the test ends.
func MustOpen(tb testing.TB, path string, opts Options) *DB {
	tb.Helper()
	db, err := Open(context.Background(), path, opts)
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
