package dispatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An adapter whose package.json wants a newer Node than the one its #!
// line finds on the daemon's PATH (or its command's interpreter) is
// named, with both versions; one that fits, or says nothing, is not.
func TestNodeProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	// A stand-in node that reports a version, as `node --version` does.
	for _, n := range []struct{ name, version string }{{"node", "v20.20.2"}, {"node22", "v22.23.3"}} {
		writeTestFile(t, filepath.Join(bin, n.name), "#!/bin/sh\necho "+n.version+"\n", 0o755)
	}
	look := func(name string) (string, error) {
		p := filepath.Join(bin, name)
		if _, err := os.Stat(p); err != nil {
			return "", exec.ErrNotFound
		}
		return p, nil
	}
	adapter := func(engines, shebang string) Adapter {
		pkg := filepath.Join(t.TempDir(), "pkg")
		writeTestFile(t, filepath.Join(pkg, "package.json"), `{"name":"@x/adapter","version":"1.2.3"`+engines+`}`, 0o644)
		writeTestFile(t, filepath.Join(pkg, "dist", "index.js"), shebang+"\nconsole.log(1)\n", 0o755)
		return IdentifyAdapter(filepath.Join(pkg, "dist", "index.js"))
	}
	for _, c := range []struct {
		name, engines, shebang, interp, want string
	}{
		{"too old through env", `,"engines":{"node":">=22"}`, "#!/usr/bin/env node", "", "needs Node >=22 (its package.json engines), but it runs with " + filepath.Join(bin, "node") + ", which is 20.20.2"},
		{"too old, env -S", `,"engines":{"node":">=22"}`, "#!/usr/bin/env -S node --no-warnings", "", "which is 20.20.2"},
		{"fits", `,"engines":{"node":">=18.0.0"}`, "#!/usr/bin/env node", "", ""},
		{"an or-range that fits", `,"engines":{"node":"^20.19.0 || >=22.12.0"}`, "#!/usr/bin/env node", "", ""},
		{"the interpreter named", `,"engines":{"node":">=22"}`, "#!/usr/bin/env node", filepath.Join(bin, "node22"), ""},
		{"absolute #!", `,"engines":{"node":">=22"}`, "#!" + filepath.Join(bin, "node22"), "", ""},
		{"no engines", ``, "#!/usr/bin/env node", "", ""},
		{"not a node script", `,"engines":{"node":">=22"}`, "#!/bin/sh", "", ""},
	} {
		a := adapter(c.engines, c.shebang)
		a.Interpreter = c.interp
		got := nodeProblem(a, look)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func writeTestFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
