package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
)

// Test-only switches exist only in test builds (testswitch.go).

// planted is what a hostile project checks in beside its .mcp.json: a
// program for each way the env block of its relay server entry could make
// the shared daemon run it. Each writes its marker file when it runs.
type planted struct {
	dir   string // the project: the poisoned facade's cwd
	bin   string // a directory put first on the facade's PATH
	home  string // a HOME with the project's own settings
	shim  string // for RELAY_TEST_AGENT_SHIM
	hook  string // for NODE_OPTIONS=--require
	rc    string // for BASH_ENV
	marks string // where the markers go
}

func plant(t *testing.T) planted {
	t.Helper()
	root := t.TempDir()
	p := planted{dir: filepath.Join(root, "project"), marks: filepath.Join(root, "marks")}
	p.bin, p.home = filepath.Join(p.dir, "tools", "bin"), filepath.Join(p.dir, "home")
	p.shim, p.hook, p.rc = filepath.Join(p.dir, "shim.sh"), filepath.Join(p.dir, "hook.js"), filepath.Join(p.dir, "rc.sh")
	for _, d := range []string{p.bin, p.home, p.marks} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(name string) string { return filepath.Join(p.marks, name) }
	write(p.shim, "#!/bin/sh\necho \"$@\" >> "+mark("shim")+"\nexit 1\n", 0o755)
	write(p.hook, "require('fs').appendFileSync("+strconv.Quote(mark("node-options"))+", process.argv.join(' ') + '\\n');\n", 0o644)
	write(p.rc, "echo \"$0\" >> "+mark("bash-env")+"\n", 0o644)
	// A claude-agent-acp that claims the verified adapter version.
	write(filepath.Join(p.bin, "claude-agent-acp"), "#!/bin/sh\necho planted >> "+mark("claude")+"\nexit 1\n", 0o755)
	write(filepath.Join(p.dir, "tools", "package.json"), `{"name": "@zed-industries/claude-agent-acp", "version": "0.23.1"}`, 0o644)
	return p
}

// ran returns the markers of the planted programs that ran.
func (p planted) ran(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(p.marks)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(p.marks, e.Name()))
		out = append(out, e.Name()+": "+strings.TrimSpace(string(b)))
	}
	return out
}

// withoutEnv returns environ without the named variables.
func withoutEnv(environ []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// agentStartEnv returns the variable names of each fake agent start
// recorded in log, in order.
func agentStartEnv(t *testing.T, log string) [][]string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the fake agent's log: %v", err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Event string   `json:"event"`
			Env   []string `json:"env"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("agent log line %q: %v", line, err)
		}
		if ev.Event == "start" {
			out = append(out, ev.Env)
		}
	}
	return out
}

// A release build has no test switch: RELAY_TEST_AGENT_SHIM and
// RELAY_TEST_UNHARDENED in the environment of a daemon started by hand
// change nothing, and their names are not even in the binary. The test
// build, with the same environment, honours them: the control that shows
// the test would see it.
func TestReleaseBuildHasNoTestSwitches(t *testing.T) {
	t.Parallel()
	release := releaseBin(t)
	for _, tc := range []struct {
		name     string
		bin      string
		honoured bool
	}{{"test build, the control", relayBin, true}, {"release build", release, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := plant(t)
			agentLog := filepath.Join(t.TempDir(), "agent.jsonl")
			home := newHome(t, fullConfig(t, "allow-guarded", ""))
			env := append(withoutEnv(os.Environ(), testShimEnv), fastExit...)
			env = append(env, testShimEnv+"="+p.shim, dispatch.UnhardenedEnv+"=opencode", "FAKEAGENT_LOG="+agentLog)
			d := launchDaemonArgv(t, home, []string{tc.bin, "daemon", "--home", home}, env)
			c := apiClient(home)
			r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
				"target": "opencode", "prompt": "echo hardened", "mission_id": "M-1", "lease_id": "S-1", "cwd": t.TempDir()}))
			task := taskEnded(t, c, r.str("task_id"))
			ran := p.ran(t)
			testOnly := strings.Contains(d.stderr.String(), "TEST ONLY")
			if tc.honoured {
				if len(ran) == 0 || !testOnly {
					t.Fatalf("the test build ignored its switches (planted shim ran: %v, TEST ONLY logged: %v): this test cannot see them", ran, testOnly)
				}
				return
			}
			if len(ran) > 0 || testOnly {
				t.Errorf("the release build honoured a test switch: planted programs ran %v, TEST ONLY logged: %v\n%s", ran, testOnly, d.stderr.String())
			}
			if task.str("state") != "completed" {
				t.Fatalf("task %s/%s (%s), want completed", task.str("state"), task.str("code"), task.str("message"))
			}
			starts := agentStartEnv(t, agentLog)
			if len(starts) != 1 || !slices.Contains(starts[0], "OPENCODE_DISABLE_PROJECT_CONFIG") {
				t.Errorf("opencode ran without its hardening profile's environment: %v", starts)
			}
		})
	}
	// Not compiled in at all: the names of the switches only the test
	// build reads are absent from the release binary.
	for bin, want := range map[string]bool{relayBin: true, release: false} {
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{testShimEnv} {
			if got := bytes.Contains(b, []byte(name)); got != want {
				t.Errorf("%s holds %s: %v, want %v", filepath.Base(bin), name, got, want)
			}
		}
	}
}
