package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestRotatingLog: the log rotates to relay.log.1 before a record would
// take it past its bound, records are never split, at most two files
// exist, and a log already over the bound is rotated when opened.
func TestRotatingLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "relay.log")
	l, err := openRotatingLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte("x"), 29)
	rec = append(rec, '\n') // 30 bytes a record
	for range 7 {           // 210 bytes: rotated twice
		if _, err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cur, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if len(cur) != 30 || len(old) != 90 {
		t.Errorf("relay.log %d bytes, relay.log.1 %d bytes; want 30 and 90 (whole records, bound 100)", len(cur), len(old))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("relay.log mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if _, err := os.Stat(path + ".2"); !os.IsNotExist(err) {
		t.Errorf("a third file exists: %v", err)
	}

	// Reopened over the bound: rotated at once.
	if err := os.WriteFile(path, bytes.Repeat([]byte("y"), 150), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err = openRotatingLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Errorf("reopened log is %d bytes, want a fresh file", fi.Size())
	}
	if b, _ := os.ReadFile(path + ".1"); len(b) != 150 {
		t.Errorf("relay.log.1 = %d bytes, want the old 150", len(b))
	}
}
