package main

import (
	"os"
	"sync"

	"github.com/hai-relay/relay/model"
)

// logMaxBytes is the size at which relay.log is rotated: it becomes
// relay.log.1 (replacing an older one) and a new relay.log is started, so
// a daemon that runs for months keeps at most twice this on disk.
const logMaxBytes = 16 << 20

// rotatingLog is an append-only log file that rotates itself at maxBytes.
// Writes are whole log records (slog writes one record per call), so a
// record is never split across the two files.
type rotatingLog struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

// openRotatingLog opens (or creates, 0600) path for appending, rotating it
// first if it is already over maxBytes.
func openRotatingLog(path string, maxBytes int64) (*rotatingLog, error) {
	l := &rotatingLog{path: path, max: maxBytes}
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

// rotate renames the file to path.1 and starts a new one.
func (l *rotatingLog) rotate() error {
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	old := l.f
	if err := l.open(); err != nil {
		l.f = old // keep logging to the renamed file rather than nowhere
		return err
	}
	return old.Close()
}

// Write appends p, rotating first when p would take the file past max.
// A failed rotation keeps writing to the current file.
func (l *rotatingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
