package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hai-relay/relay/model"
)

// logMaxBytes is the size at which relay.log is rotated, and
// logGenerations how many rotated files are kept (relay.log.1, the newest,
// to relay.log.5): a daemon that runs for months keeps at most six times
// this on disk.
const (
	logMaxBytes    = 16 << 20
	logGenerations = 5
	// logStartupMax bounds the start-up lines kept for the head of every
	// new generation.
	logStartupMax = 64 << 10
)

// rotatingLog is an append-only log file that rotates itself at maxBytes,
// keeping gens older files. Writes are whole log records (slog writes one
// record per call), so a record is never split across two files.
//
// The records written before startupDone (the daemon's start-up: its
// version, pid, home, recovery) are kept and written again at the head of
// every new file, after a line saying so: however much is logged later,
// every generation says which daemon wrote it and how it started.
type rotatingLog struct {
	mu      sync.Mutex
	path    string
	max     int64
	gens    int
	f       *os.File
	size    int64
	startup []byte
	sealed  bool
}

// openRotatingLog opens (or creates, 0600) path for appending, rotating it
// first if it is already over maxBytes.
func openRotatingLog(path string, maxBytes int64, gens int) (*rotatingLog, error) {
	l := &rotatingLog{path: path, max: maxBytes, gens: max(gens, 1)}
	if err := l.open(); err != nil {
		return nil, err
	}
	if l.size >= l.max {
		if err := l.rotate(); err != nil {
			l.f.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *rotatingLog) open() error {
	// Never through a link, and only a file of ours (see openHomeFile):
	// a link planted as relay.log must not make the daemon append to
	// another file.
	f, err := openHomeFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600, model.CodeInvalidArgs)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// rotate shifts path.N to path.N+1 (dropping the oldest), renames the file
// to path.1, and starts a new one headed by the start-up records (unless
// they would take a quarter of it).
func (l *rotatingLog) rotate() error {
	for i := l.gens - 1; i >= 1; i-- {
		from := fmt.Sprintf("%s.%d", l.path, i)
		if err := os.Rename(from, fmt.Sprintf("%s.%d", l.path, i+1)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	old := l.f
	if err := l.open(); err != nil {
		l.f = old // keep logging to the renamed file rather than nowhere
		return err
	}
	if len(l.startup) > 0 && int64(len(l.startup)) < l.max/4 {
		head, _ := json.Marshal(map[string]string{"time": time.Now().Format(time.RFC3339Nano), "level": "INFO",
			"msg": "log rotated; this daemon's start-up lines follow, as first written"})
		n, _ := l.f.Write(append(append(head, '\n'), l.startup...))
		l.size += int64(n)
	}
	return old.Close()
}

// startupDone ends the start-up records: later ones are not repeated.
func (l *rotatingLog) startupDone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sealed = true
}

// Write appends p, rotating first when p would take the file past max.
// A failed rotation keeps writing to the current file.
func (l *rotatingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.sealed && len(l.startup)+len(p) <= logStartupMax {
		l.startup = append(l.startup, p...)
	}
	if l.size > 0 && l.size+int64(len(p)) > l.max {
		_ = l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// Close closes the current file.
func (l *rotatingLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
