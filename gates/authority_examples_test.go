package gates_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
)

// TestAuthorityDocExamples runs the example adapters of docs/authority.md
// (docs/examples/authority.sh and authority.py) as real adapters through
// the relay's client, so the page's examples are known to work: each
// policy row of the page gives the answer it promises, read by the same
// strict parser as any adapter's.
func TestAuthorityDocExamples(t *testing.T) {
	t.Parallel()
	examples := map[string]string{"sh": "/bin/sh", "python": "python3"}
	for name, interp := range examples {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			prog, err := exec.LookPath(interp)
			if err != nil {
				// scripts/test runs on machines that have python3 (Debian's
				// default); a machine without it cannot run this example.
				t.Fatalf("%s is not on PATH: the %s example of docs/authority.md cannot be checked", interp, name)
			}
			script := map[string]string{"sh": "authority.sh", "python": "authority.py"}[name]
			path, err := filepath.Abs(filepath.Join("..", "docs", "examples", script))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(t.TempDir(), "decisions.log")
			// As configured: [authority] command = [prog, path], env = ["AUTHORITY_LOG=…"].
			a := gates.NewAuthority([]string{prog, path}, 0, gates.WithEnv("AUTHORITY_LOG="+log))
			cases := []struct {
				target string
				mode   model.Mode
				allow  bool
				want   model.Assurance
			}{
				{"codex", model.ModeReadOnly, true, model.AssuranceStandard},
				{"claude", model.ModeStateChanging, true, model.AssuranceGuarded},
				{"gemini", model.ModeStateChanging, false, ""},
			}
			for _, c := range cases {
				req := testRequest()
				req.Target, req.Mode = c.target, c.mode
				ans, err := a.Consult(context.Background(), req)
				if err != nil {
					t.Fatalf("%s %s: %v (stderr %q)", c.target, c.mode, err, ans.Stderr)
				}
				if ans.Allow != c.allow || ans.ExitCode != 0 {
					t.Errorf("%s %s: allow %v exit %d, want allow %v exit 0", c.target, c.mode, ans.Allow, ans.ExitCode, c.allow)
				}
				if c.allow && ans.Assurance != c.want {
					t.Errorf("%s %s: assurance %q, want %q", c.target, c.mode, ans.Assurance, c.want)
				}
				if !c.allow && ans.DenyCode != "example.state_changing" {
					t.Errorf("%s %s: deny code %q, want example.state_changing", c.target, c.mode, ans.DenyCode)
				}
			}
			// A version the example does not know is "could not decide":
			// a non-zero exit, which blocks the task (authority_unavailable).
			cmd := exec.Command(prog, path)
			cmd.Stdin = strings.NewReader(`{"version":2,"mode":"read_only"}` + "\n")
			if out, err := cmd.Output(); err == nil {
				t.Errorf("a version 2 request: exit 0 with %q, want a non-zero exit", out)
			}
			if name == "python" {
				data, err := os.ReadFile(log)
				if err != nil {
					t.Fatalf("the python example logs to AUTHORITY_LOG: %v", err)
				}
				if n := strings.Count(string(data), "\n"); n != len(cases) {
					t.Errorf("decisions.log has %d lines, want %d:\n%s", n, len(cases), data)
				}
			}
		})
	}
}
