package dispatch

import (
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses; fields counted from its
	// last ')'.
	line := "4242 (evil) (name x) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 " +
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.state != 'S' || st.ppid != 1 || st.pgrp != 4240 || st.start != 987654 {
		t.Fatalf("parsed %+v", st)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 notanumber 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
	self, err := readProcStat(os.Getpid())
	if err != nil || self.start == 0 || self.pgrp <= 0 || self.ppid != os.Getppid() || self.dead() {
		t.Fatalf("own stat %+v, %v", self, err)
	}
}

func TestValidFileName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"T-01HX", "a.b", "x_y-z"} {
		if !validFileName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00b", ".tmp-1"} {
		if validFileName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
