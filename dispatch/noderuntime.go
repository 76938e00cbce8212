package dispatch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
)

// nodeProblem says why the Node an adapter would run with does not meet
// its package.json's engines.node ("" when it does, or when either cannot
// be told: no package.json, no engines, not a Node script). The Node is
// the command's interpreter when it names one (node /path/script.js),
// else the one its script's #! line names, found through lookPath (the
// daemon's PATH) for `#!/usr/bin/env node`. npm installs such an adapter
// on an older Node with no more than an EBADENGINE warning; it then fails
// at run time, often only in the middle of a session.
func nodeProblem(a Adapter, lookPath func(string) (string, error)) string {
	want := enginesNode(a.PackageJSON)
	if want == "" {
		return ""
	}
	node := a.Interpreter
	if node == "" {
		node = shebangNode(a.RealPath, lookPath)
	}
	if node == "" || !strings.HasPrefix(filepath.Base(node), "node") {
		return ""
	}
	have := nodeVersion(node)
	c, err := semver.NewConstraint(want)
	if have == "" || err != nil {
		return ""
	}
	v, err := semver.NewVersion(have)
	if err != nil || c.Check(v) {
		return ""
	}
	return fmt.Sprintf("%s needs Node %s (its package.json engines), but it runs with %s, which is %s", a.Describe(), want, node, have)
}

// enginesNode is the engines.node range of a package.json ("" without).
func enginesNode(pkgJSON string) string {
	if pkgJSON == "" {
		return ""
	}
	b, err := os.ReadFile(pkgJSON)
	if err != nil {
		return ""
	}
	var pkg struct {
		Engines map[string]any `json:"engines"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	s, _ := pkg.Engines["node"].(string)
	return strings.TrimSpace(s)
}

// shebangNode is the interpreter a script's #! line names, resolved:
// "/usr/bin/env node" (with or without -S) through lookPath, an absolute
// path as it is. "" when the file has no #! line.
func shebangNode(script string, lookPath func(string) (string, error)) string {
	f, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	prog := fields[0]
	if filepath.Base(prog) == "env" {
		prog = ""
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") && !strings.Contains(f, "=") {
				prog = f
				break
			}
		}
		if prog == "" {
			return ""
		}
	}
	if filepath.IsAbs(prog) {
		return prog
	}
	p, err := lookPath(prog)
	if err != nil {
		return ""
	}
	return p
}

// nodeVersions caches `node --version` by the binary's identity.
var nodeVersions sync.Map // string (path, size, mtime) → string

// nodeVersion is `node --version` without its "v" ("" when it cannot be
// run), cached while the file is unchanged.
func nodeVersion(node string) string {
	st, err := os.Stat(node)
	if err != nil {
		return ""
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", node, st.Size(), st.ModTime().UnixNano())
	if v, ok := nodeVersions.Load(key); ok {
		return v.(string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return ""
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	nodeVersions.Store(key, v)
	return v
}
