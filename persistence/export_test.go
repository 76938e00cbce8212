package persistence

import "testing"

// The external tests (package persistence_test) seed stores and measure
// floors with persistencetest, which this package's internal tests cannot
// import (an import cycle). These give them the internal test helpers.
var (
	CPUTime    = cpuTime
	ReportCPU  = reportCPU
	NewTask    = newTask
	MustCreate = mustCreate
	SeqID      = seqID
	VerifyOK   = verifyOK
)

// CountRows is count: the number of rows in table (optionally filtered).
func CountRows(t testing.TB, db *DB, table, where string, args ...any) int {
	t.Helper()
	return count(t, db, table, where, args...)
}

// Migrations returns the embedded migrations in version order (the DB
// opens with embeddedMigrations). It panics if the embedded set is
// malformed, which a test rules out.
func Migrations() []Migration {
	migs, err := embeddedMigrations()
	if err != nil {
		panic(err)
	}
	return migs
}

// LatestVersion is the highest embedded migration version.
func LatestVersion() int {
	migs := Migrations()
	return migs[len(migs)-1].Version
}
