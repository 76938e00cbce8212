package persistence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hai-relay/relay/model"
)

// Result codes of modernc.org/sqlite errors that this package tells apart.
const (
	sqliteNotADB            = sqlite3.SQLITE_NOTADB
	sqliteCorrupt           = sqlite3.SQLITE_CORRUPT
	sqliteFull              = sqlite3.SQLITE_FULL
	sqliteIOErrWrite        = sqlite3.SQLITE_IOERR_WRITE
	sqliteConstraintUnique  = sqlite3.SQLITE_CONSTRAINT_UNIQUE
	sqliteConstraintPrimary = sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
)

// pageSize applies model.DefaultPageSize and model.MaxPageSize: a store
// caps a page, the service refuses a limit out of range (model.PageLimit).
func pageSize(n int) int {
	switch {
	case n <= 0:
		return model.DefaultPageSize
	case n > model.MaxPageSize:
		return model.MaxPageSize
	}
	return n
}

// formatTime is the one textual form of times in the database and in the
// audit canonical encoding: RFC 3339 with up to nanoseconds, in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// parseTime reads a time written by formatTime.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// parseTimePtr reads a nullable time column.
func parseTimePtr(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := parseTime(*s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// formatTimePtr is formatTime of a nullable time column.
func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// normTime is what a time becomes after a round trip through the database.
func normTime(t time.Time) time.Time { return t.UTC().Round(0) }

// stamp returns t, or now() when t is zero, as stored. A time outside the
// years 1–9999 cannot be written in RFC 3339 and is refused (invalid_args),
// as is a clock that returns one.
func stamp(what string, t time.Time, now func() time.Time) (time.Time, error) {
	if t.IsZero() {
		t = now()
	}
	t = normTime(t)
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, model.InvalidArgs("%s %s is outside the years 1-9999", what, t)
	}
	return t, nil
}

// jsonArray encodes a slice for a JSON column; nil is "[]".
func jsonArray[T any](v []T) (string, error) {
	if v == nil {
		return "[]", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// jsonObject encodes a string map for a JSON column; nil is "{}".
func jsonObject(m map[string]string) (string, error) {
	if m == nil {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// fromJSONArray decodes a JSON array column; the result is never nil, so
// that the wire shows [] rather than null.
func fromJSONArray[T any](s string) ([]T, error) {
	out := []T{}
	if s == "" || s == "[]" { // most rows: no decoder for nothing
		return out, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// fromJSONObject decodes a JSON object column; empty becomes nil.
func fromJSONObject(s string) (map[string]string, error) {
	var m map[string]string
	if s == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// sqliteCode returns the extended result code of a SQLite error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint failure.
func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqliteConstraintUnique || c == sqliteConstraintPrimary
}

// storageFull turns a write that failed for want of room into a
// model.Error with CodeStorageFull; other errors are returned as they are.
// Want of room is SQLITE_FULL (the disk is full: ENOSPC), or a write error
// once a file of the database has reached the process's file-size limit
// (RLIMIT_FSIZE: SQLite completes a write cut short at the limit, and the
// rest fails with EFBIG, which it reports as SQLITE_IOERR_WRITE). SQLite
// rolled back the write's transaction: nothing of it is stored, and the
// database is as it was.
func storageFull(path string, err error) error {
	if err == nil {
		return nil
	}
	switch code := sqliteCode(err); {
	case code&0xff == sqliteFull:
	case code == sqliteIOErrWrite && atSizeLimit(path):
	default:
		return err
	}
	var me *model.Error
	if errors.As(err, &me) {
		return err
	}
	return &model.Error{Code: model.CodeStorageFull, Err: err,
		Message: "the relay's disk is full: this write was not stored (what was acknowledged before is kept)",
		Hint:    "free space on the filesystem holding " + path + " (or raise the daemon's file-size limit); reads go on working, and writes work again once there is room"}
}

// atSizeLimit reports whether the database at path, its WAL or its
// shared-memory file has reached the process's file-size limit.
func atSizeLimit(path string) bool {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return false
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && uint64(fi.Size()) >= lim.Cur {
			return true
		}
	}
	return false
}

// notFound builds the CodeNotFound error for a missing row.
func notFound(what, id string) error {
	return &model.Error{Code: model.CodeNotFound, Message: fmt.Sprintf("%s %q not found", what, model.Echo(id))}
}

// wrap adds the operation to an internal error, leaving *model.Error values
// (which carry their own stable code and message) as they are.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		return err
	}
	return fmt.Errorf("persistence: %s: %w", op, err)
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// sha256Hex returns the hex SHA-256 of s; audit rows carry it instead of
// large bodies.
func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
