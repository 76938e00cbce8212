package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
)

// dbPath is the database inside a relay home.
func dbPath(home string) string { return filepath.Join(home, "relay.db") }

// openExisting opens the home's database for an operator command that
// only reads. It never creates a database where there is none.
func openExisting(ctx context.Context, home string) (*persistence.DB, error) {
	// The database is opened by path: first the home and its files must
	// be this user's (see secureHome).
	if _, _, err := secureHome(home, false, model.CodeInvalidArgs); err != nil {
		return nil, err
	}
	if err := checkHomeFiles(home, model.CodeInvalidArgs); err != nil {
		return nil, err
	}
	p := dbPath(home)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil, model.Errorf(model.CodeNotFound, "no relay database at %s", p).
			WithHint("start the daemon once with `relay daemon` (or pass the right --home)")
	}
	db, err := persistence.Open(ctx, p, persistence.Options{})
	if err != nil {
		return nil, openError(p, err)
	}
	return db, nil
}

// openError is the error of a database that persistence.Open refused.
func openError(p string, err error) error {
	switch {
	case errors.Is(err, persistence.ErrNotDatabase):
		return &model.Error{Code: model.CodeDatabaseCorrupt, Err: err,
			Message: p + " is not a SQLite database; the relay will not touch it",
			Hint:    "move the file aside (it is left as it is) and put back relay.db from a backup, or pass another --home"}
	case errors.Is(err, persistence.ErrCorrupt):
		return &model.Error{Code: model.CodeDatabaseCorrupt, Err: err,
			Message: p + " is corrupt (" + corruptDetail(err) + "); the relay refused to open it and left it as it is",
			Hint: "stop every relay command, move the file aside and put back relay.db from a backup; " +
				"or salvage what it holds: sqlite3 " + p + " .recover | sqlite3 " + filepath.Join(filepath.Dir(p), "recovered.db") +
				", check it, and move it to relay.db"}
	}
	return &model.Error{Code: model.CodeInternal, Err: err, Message: "cannot open " + p + ": " + err.Error(),
		Hint: "check the file's permissions and that no other program holds it"}
}

// corruptDetail is what SQLite found wrong, from an error wrapping
// persistence.ErrCorrupt: the text after it.
func corruptDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, persistence.ErrCorrupt.Error()+": "); i >= 0 {
		return model.Clip(msg[i+len(persistence.ErrCorrupt.Error())+2:], 200)
	}
	return "SQLite reports it malformed"
}
