// Package procstat reads a process's /proc/PID/stat: its state, parent,
// process group, CPU times and start time. It is a leaf (it imports
// nothing of the module), so that every part of the relay that must tell
// one process from another (the daemon placing a connection, the
// dispatcher reaping a run, the agent shim, the tests' fakes) parses the
// file one way.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Stat is what the relay reads of /proc/PID/stat.
type Stat struct {
	State byte   // field 3: R, S, D, Z (zombie), X (dead), …
	PPID  int    // field 4
	PGRP  int    // field 5
	UTime uint64 // field 14, user CPU time in clock ticks
	STime uint64 // field 15, system CPU time in clock ticks
	Start uint64 // field 22, the start time in clock ticks since boot
}

// Dead reports whether the process has ended: a zombie its parent has not
// reaped yet, or dead.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' || s.State == 'x' }

// Read reads and parses /proc/PID/stat. Without /proc, or for a process
// that does not exist, the error is the file's.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(b)
}

// Parse parses the contents of /proc/PID/stat. The command name (field 2)
// is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from its last ')'.
func Parse(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("malformed /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:]) // f[k] is field k+3
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, errors.New("malformed /proc stat: too few fields")
	}
	var (
		s    = Stat{State: f[0][0]}
		errs []error
	)
	num := func(k int, name string) uint64 {
		v, err := strconv.ParseUint(string(f[k]), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("malformed /proc stat: %s: %w", name, err))
		}
		return v
	}
	s.PPID = int(num(1, "ppid"))
	s.PGRP = int(num(2, "pgrp"))
	s.UTime = num(11, "utime")
	s.STime = num(12, "stime")
	s.Start = num(19, "starttime")
	if len(errs) > 0 {
		return Stat{}, errs[0]
	}
	return s, nil
}
