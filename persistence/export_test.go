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
