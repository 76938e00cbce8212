package main

import (
	"bytes"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hai-relay/relay"

// allowed is the dependency rule (README, Layout): for each top-level
// package, the module-internal top-level packages it may import.
var allowed = map[string][]string{
	"model":       {},
	"spec":        {"model"},
	"gates":       {"model", "spec"},
	"machine":     {"model", "spec", "gates"},
	"persistence": {"model"},
	"dispatch":    {"model"},
	"facade":      {"model", "spec"},
	"cmd":         {"*"},
}

// leafEdges are the only packages of the module a top-level package may
// import beyond its row in allowed. gates runs the authority adapter with
// the process supervisor dispatch runs agents with, so that both are
// started, bounded, killed and reaped by one implementation. The facade's
// server tells a connection's process from a later one with the same pid
// by the /proc stat parser the dispatcher reaps runs with. Both are
// leaves (TestLeafEdgesAreLeaves), so an edge brings nothing else of
// dispatch.
var leafEdges = map[string][]string{
	"gates":  {"dispatch/supervisor"},
	"facade": {"dispatch/procstat"},
}

// edgeAllowed reports whether a package under the top-level package from
// may import imp, a package of the module under another top-level one.
func edgeAllowed(from, imp string) bool {
	return contains(allowed[from], topLevel(imp)) ||
		contains(leafEdges[from], strings.TrimPrefix(imp, module+"/"))
}

func topLevel(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	return strings.SplitN(rel, "/", 2)[0]
}

// goList runs go list with args and returns its standard output only:
// what go list says on stderr (a warning such as "ignoring symlink" for a
// linked directory under the module) is no package. On failure the error
// carries stderr.
func goList(args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// TestDependencyRule fails on any import edge the layout forbids, in the
// non-test code of every package (go list without -test, as tailscale's
// deps_test does).
func TestDependencyRule(t *testing.T) {
	t.Parallel()
	out, err := goList("-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...")
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		from := topLevel(pkg)
		seen[from] = true
		rule, ok := allowed[from]
		if !ok {
			t.Errorf("package %s is under %q, which is not one of the top-level packages the dependency rule lists (allowed; the README's Layout)", pkg, from)
			continue
		}
		for _, imp := range imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := topLevel(imp)
			if to == from || (len(rule) == 1 && rule[0] == "*") {
				if to == "cmd" && from != "cmd" {
					t.Errorf("%s imports %s: nothing imports cmd", pkg, imp)
				}
				continue
			}
			if !edgeAllowed(from, imp) {
				t.Errorf("%s imports %s: %s may import only %v", pkg, imp, from, rule)
			}
		}
	}
	for p := range allowed {
		if !seen[p] {
			t.Errorf("top-level package %s has no Go package", p)
		}
	}
}

// The rule catches a violation: the leaf edge lets gates import the
// supervisor and nothing else of dispatch, and no one else.
func TestEdgeAllowedCatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, imp string
		want      bool
	}{
		{"gates", module + "/spec", true},
		{"gates", module + "/dispatch/supervisor", true},
		{"gates", module + "/dispatch", false},
		{"gates", module + "/dispatch/agentshim", false},
		{"gates", module + "/machine", false},
		{"machine", module + "/dispatch/supervisor", false},
		{"dispatch", module + "/gates", false},
		{"facade", module + "/dispatch/procstat", true},
		{"facade", module + "/dispatch/supervisor", false},
		{"gates", module + "/dispatch/procstat", false},
	} {
		if got := edgeAllowed(c.from, c.imp); got != c.want {
			t.Errorf("edgeAllowed(%s, %s) = %v, want %v", c.from, c.imp, got, c.want)
		}
	}
}

// TestLeafEdgesAreLeaves checks that each package a leaf edge names
// depends on nothing of the module and, outside the standard library, on
// golang.org/x/sys only.
func TestLeafEdgesAreLeaves(t *testing.T) {
	t.Parallel()
	for _, leaves := range leafEdges {
		for _, leaf := range leaves {
			out, err := goList("-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/"+leaf)
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			for _, p := range strings.Fields(string(out)) {
				if p != module+"/"+leaf && !strings.HasPrefix(p, "golang.org/x/sys/") {
					t.Errorf("%s depends on %s; a leaf edge's package may use the standard library and golang.org/x/sys only", leaf, p)
				}
			}
		}
	}
}

// TestModelIsStandardLibraryOnly checks model's whole dependency closure.
func TestModelIsStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	out, err := goList("-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/model")
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != module+"/model" {
			t.Errorf("model depends on %s; it must use the standard library only", p)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// testOnly reports whether pkg, a package of this module, is test-only:
// a fake under cmd/testfakes, the benchmark command, or a helper package
// whose name ends in "test" (persistencetest, gatestest, dispatchtest).
// Every other non-test package is product.
func testOnly(pkg string) bool {
	rel := strings.TrimPrefix(pkg, module+"/")
	return strings.HasPrefix(rel, "cmd/testfakes/") || rel == "cmd/relay-bench" ||
		strings.HasSuffix(path.Base(rel), "test")
}

// testOnlyPackages are the test-only packages known today. The tests
// below go by testOnly, not by this list; the list makes sure testOnly
// still recognises each of them, and that none is stale.
var testOnlyPackages = []string{
	"cmd/testfakes/fakeagent", "cmd/testfakes/fakeauthority", "cmd/testfakes/mcpfloor", "cmd/testfakes/agentshim", "cmd/daemontest",
	"cmd/relay-bench",
	"dispatch/dispatchtest", "gates/gatestest", "persistence/persistencetest", "model/servicetest", "spec/spectest",
}

// modulePackages returns each package of the module (non-test code, as go
// list reports it) with its imports.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	out, err := goList("-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...")
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkgs[fields[0]] = fields[1:]
	}
	return pkgs
}

func TestTestOnlyPackagesAreKnown(t *testing.T) {
	t.Parallel()
	pkgs := modulePackages(t)
	for _, p := range testOnlyPackages {
		if _, ok := pkgs[module+"/"+p]; !ok {
			t.Errorf("testOnlyPackages lists %s, which is not a package of the module", p)
		}
		if !testOnly(module + "/" + p) {
			t.Errorf("testOnly does not recognise %s", p)
		}
	}
	for p := range pkgs {
		if testOnly(p) && !contains(testOnlyPackages, strings.TrimPrefix(p, module+"/")) {
			t.Errorf("%s is test-only but not in testOnlyPackages", p)
		}
	}
}

// testImports returns, sorted, each import of test code by a product
// package: of the testing package or of a test-only package of the module.
func testImports(pkgs map[string][]string) []string {
	var bad []string
	for pkg, imports := range pkgs {
		if testOnly(pkg) {
			continue
		}
		for _, imp := range imports {
			if imp == "testing" || (strings.HasPrefix(imp, module+"/") && testOnly(imp)) {
				bad = append(bad, pkg+" imports "+imp)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// Nothing in the product imports test code: the testing package, the
// fakes, the benchmark command or a …test helper package. Test files are
// not product (go list without -test leaves them out).
func TestProductImportsNoTestOnlyPackage(t *testing.T) {
	t.Parallel()
	for _, b := range testImports(modulePackages(t)) {
		t.Errorf("%s, which is test-only", b)
	}
}

// The check catches a violation: a product package importing a test
// helper, a fake, the bench or testing (and lets test-only code import
// each other).
func TestProductImportsNoTestOnlyPackageCatches(t *testing.T) {
	t.Parallel()
	got := testImports(map[string][]string{
		module + "/machine":         {module + "/model", module + "/persistence/persistencetest", "testing"},
		module + "/facade":          {module + "/cmd/testfakes/mcpfloor", module + "/cmd/relay-bench"},
		module + "/cmd/relay-bench": {module + "/persistence/persistencetest", "testing"},
		module + "/gates/gatestest": {"testing", module + "/cmd/testfakes/fakeauthority"},
	})
	want := []string{
		module + "/facade imports " + module + "/cmd/relay-bench",
		module + "/facade imports " + module + "/cmd/testfakes/mcpfloor",
		module + "/machine imports " + module + "/persistence/persistencetest",
		module + "/machine imports testing",
	}
	if !slices.Equal(got, want) {
		t.Errorf("testImports = %q, want %q", got, want)
	}
}

// The relay binary links no test code: neither the testing package (its
// flags and runtime hooks) nor any fake, benchmark or test helper.
func TestRelayBinaryHasNoTestCode(t *testing.T) {
	t.Parallel()
	out, err := goList("-deps", module+"/cmd/relay")
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "testing" || strings.HasPrefix(dep, "testing/") || (strings.HasPrefix(dep, module+"/") && testOnly(dep)) {
			t.Errorf("the relay binary depends on %s", dep)
		}
	}
}

// The product's core packages are pure: they read no config file (the TOML
// library is linked only by the command that loads config.toml,
// cmd/relay/config) and speak no HTTP (the status table is the socket
// API's, facade/socketapi).
func TestCoreHasNoConfigParserNorHTTP(t *testing.T) {
	t.Parallel()
	out, err := goList("-deps", module+"/gates", module+"/machine", module+"/spec")
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, bad := range []string{"github.com/BurntSushi/toml", "net/http"} {
		if contains(deps, bad) {
			t.Errorf("gates, machine or spec depends on %s", bad)
		}
	}
}
