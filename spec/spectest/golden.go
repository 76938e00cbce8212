// Package spectest holds what the tests of the relay's promises share:
// golden files, the rendered form of what users and models read (the
// tools/list answer, the CLI's help, relay tasks show).
package spectest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the golden file at path or, with update (each
// package's -update flag), rewrites the file. A difference fails the test
// with what the code gives now, to review.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code gives (run the test with -update to accept it, and review the diff):\n%s", path, got)
	}
}
