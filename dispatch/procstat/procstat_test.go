package procstat_test

import (
	"os"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch/procstat"
)

func TestParse(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses; fields counted from its
	// last ')'.
	line := "4242 (evil) (name x) S 1 4240 4240 0 -1 4194560 100 0 0 0 11 22 0 0 20 0 1 0 987654 1000 10 " +
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n"
	st, err := procstat.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procstat.Stat{State: 'S', PPID: 1, PGRP: 4240, UTime: 11, STime: 22, Start: 987654}); st != want {
		t.Fatalf("parsed %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 notanumber 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (x) SS 1 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5"} {
		if _, err := procstat.Parse([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
	for _, z := range []byte("ZXx") {
		if !(procstat.Stat{State: z}).Dead() {
			t.Errorf("state %c is not dead", z)
		}
	}
	self, err := procstat.Read(os.Getpid())
	// The state is the thread-group leader's: running or sleeping while
	// another thread reads it, never dead.
	if err != nil || self.Start == 0 || self.PGRP <= 0 || self.PPID != os.Getppid() || self.Dead() || !strings.ContainsRune("RSD", rune(self.State)) {
		t.Fatalf("own stat %+v, %v", self, err)
	}
	if _, err := procstat.Read(-1); err == nil {
		t.Error("read a stat for pid -1")
	}
}
