package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRotatingLog: the log rotates to relay.log.1 before a record would
// take it past its bound, records are never split, no more than the
// generations asked for exist (here one), and a log already over the bound
// is rotated when opened.
func TestRotatingLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "relay.log")
	l, err := openRotatingLog(path, 100, 1)
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
	l, err = openRotatingLog(path, 100, 1)
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

// TestRotatingLogKeepsGenerationsAndStartup: rotation keeps relay.log.1 …
// relay.log.N, newest first, dropping only the oldest; and every new file
// begins with the start-up records (those written before startupDone),
// so no amount of later logging erases how the daemon started.
func TestRotatingLogKeepsGenerationsAndStartup(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "relay.log")
	l, err := openRotatingLog(path, 1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	write := func(s string) {
		t.Helper()
		if _, err := l.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"msg":"relay daemon ready","pid":42}`)
	l.startupDone()
	for i := range 200 { // ~8 KB of 40-byte records: many rotations
		write(fmt.Sprintf(`{"msg":"refused","n":%05d,"pad":"xxxxx"}`, i))
	}
	for _, g := range []string{"", ".1", ".2", ".3"} {
		b, err := os.ReadFile(path + g)
		if err != nil {
			t.Fatalf("relay.log%s: %v", g, err)
		}
		if !bytes.Contains(b, []byte("relay daemon ready")) {
			t.Errorf("relay.log%s lacks the start-up line:\n%s", g, b)
		}
		if len(b) > 1000 {
			t.Errorf("relay.log%s is %d bytes, over its bound", g, len(b))
		}
	}
	if _, err := os.Stat(path + ".4"); !os.IsNotExist(err) {
		t.Errorf("a fourth generation exists: %v", err)
	}
	// Newest first: the last record is in relay.log, and relay.log.1
	// holds records just before relay.log's.
	cur, _ := os.ReadFile(path)
	prev, _ := os.ReadFile(path + ".1")
	if !bytes.Contains(cur, []byte(`"n":00199`)) || bytes.Contains(prev, []byte(`"n":00199`)) {
		t.Errorf("the newest record is not in relay.log alone")
	}
	// Start-up records are kept once: the later ones are not repeated.
	if bytes.Count(cur, []byte(`"n":00000`)) != 0 {
		t.Errorf("a record after startupDone was repeated as start-up")
	}
}
