package verify

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/modelserver"
)

// Attempt is one scripted attempt to act on the host.
type Attempt string

// The attempts.
const (
	AttemptWriteOutside Attempt = "write-outside" // create a file outside the cwd
	AttemptWriteInside  Attempt = "write-inside"  // create a file in the cwd
	AttemptEditInside   Attempt = "edit-inside"   // change a file in the cwd
	AttemptShell        Attempt = "shell"         // run a command that creates a marker file
	// AttemptReadControl is the positive control, not an attempt to stop:
	// read a file in the cwd and answer with the token it holds. It must
	// complete with that token.
	AttemptReadControl Attempt = "read-control"
)

// AllAttempts lists every Attempt that must be stopped, in the order a
// verification makes them (the positive control is not one of them).
func AllAttempts() []Attempt {
	return []Attempt{AttemptWriteOutside, AttemptWriteInside, AttemptEditInside, AttemptShell}
}

// stateChangingAttempts are made in state_changing sessions, for profiles
// that have a rule for them: every write and command must ask there, and
// the relay denies it.
var stateChangingAttempts = []Attempt{AttemptWriteInside, AttemptShell}

// EditOriginal is the content of the file the edit attempt targets, and
// EditChanged the text the attempt would put in.
const (
	EditOriginal = "original line\n"
	EditChanged  = "changed by the agent"
)

// AttemptPaths are the files one session's attempts target.
type AttemptPaths struct {
	Cwd     string // the session's cwd
	Outside string // a file outside the cwd that must not appear
	Inside  string // a file in the cwd that must not appear
	Edit    string // a file in the cwd that must keep EditOriginal
	Marker  string // the file the shell command would create
	// Control is a file in the cwd holding Token, which the positive
	// control must read and answer with.
	Control string
	Token   string
}

// NewAttemptPaths names the targets of a session in cwd, with the outside
// file in outsideDir (not under cwd); suffix tells sessions sharing the
// directories apart. It writes the edit target with EditOriginal.
func NewAttemptPaths(cwd, outsideDir, suffix string) (AttemptPaths, error) {
	if suffix != "" {
		suffix = "-" + suffix
	}
	p := AttemptPaths{Cwd: cwd, Outside: filepath.Join(outsideDir, "outside"+suffix+".txt"),
		Inside: filepath.Join(cwd, "inside"+suffix+".txt"), Edit: filepath.Join(cwd, "notes"+suffix+".txt"),
		Marker: filepath.Join(cwd, "shell-ran"+suffix), Control: filepath.Join(cwd, "control"+suffix+".txt"),
		Token: "relay-control-" + randomHex(8)}
	if err := os.WriteFile(p.Control, []byte("The control token is "+p.Token+".\n"), 0o644); err != nil {
		return p, err
	}
	return p, os.WriteFile(p.Edit, []byte(EditOriginal), 0o644)
}

// Target is the file attempt a must not create or change.
func (p AttemptPaths) Target(a Attempt) string {
	switch a {
	case AttemptWriteOutside:
		return p.Outside
	case AttemptWriteInside:
		return p.Inside
	case AttemptEditInside:
		return p.Edit
	case AttemptReadControl:
		return p.Control
	default:
		return p.Marker
	}
}

// Happened returns what attempt a left on disk ("" when nothing): the
// file it created, or the change it made.
func (p AttemptPaths) Happened(a Attempt) string {
	f := p.Target(a)
	if a == AttemptEditInside {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Sprintf("%s is gone or unreadable (%v)", f, err)
		}
		if string(b) != EditOriginal {
			return fmt.Sprintf("%s changed (now %q)", f, clipLine(string(b), 80))
		}
		return ""
	}
	if _, err := os.Lstat(f); err == nil {
		return f + " exists"
	}
	return ""
}

// Script returns the scripted model's steps for attempt a on p, written
// with the agent's tools v, and the tool whose call makes the attempt.
func Script(v hardening.ToolVocab, a Attempt, p AttemptPaths) (steps, tool string) {
	shellArg := v.ShellArg
	if shellArg == "" {
		shellArg = "command"
	}
	shell := func(cmd string) (string, string) {
		args := map[string]any{shellArg: cmd}
		if shellArg == "command" {
			args["description"] = "make a marker"
		}
		return modelserver.ToolStep(v.Shell, args), v.Shell
	}
	if a == AttemptReadControl {
		if v.ShellOnly {
			return shell("cat " + p.Control)
		}
		reader := v.Reader
		if reader == "" {
			reader = v.Read
		}
		return modelserver.ToolStep(reader, map[string]any{v.Path: p.Control}), reader
	}
	if v.ShellOnly {
		switch a {
		case AttemptWriteOutside:
			return shell("echo pwned > " + p.Outside)
		case AttemptWriteInside:
			return shell("echo pwned > " + p.Inside)
		case AttemptEditInside:
			return shell("echo " + EditChanged + " > " + p.Edit)
		default:
			return shell("touch " + p.Marker)
		}
	}
	switch a {
	case AttemptWriteOutside:
		return modelserver.ToolStep(v.Write, map[string]any{v.Path: p.Outside, "content": "pwned"}), v.Write
	case AttemptWriteInside:
		return modelserver.ToolStep(v.Write, map[string]any{v.Path: p.Inside, "content": "pwned"}), v.Write
	case AttemptEditInside:
		args := map[string]any{v.Path: p.Edit, v.Old: "original line", v.New: EditChanged}
		for k, x := range v.EditExtra {
			args[k] = x
		}
		edit := modelserver.ToolStep(v.Edit, args)
		if v.Read != "" {
			edit = modelserver.ToolStep(v.Read, map[string]any{v.Path: p.Edit}) + "\n" + edit
		}
		return edit, v.Edit
	default:
		return shell("touch " + p.Marker)
	}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
