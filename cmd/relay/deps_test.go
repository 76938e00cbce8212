package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hai-relay/relay"

// allowed is the dependency rule of docs/conventions: for each top-level
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

func topLevel(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	return strings.SplitN(rel, "/", 2)[0]
}

// TestDependencyRule fails on any import edge the layout forbids, in the
// non-test code of every package (go list without -test, as tailscale's
// deps_test does).
func TestDependencyRule(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").CombinedOutput()
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
			t.Errorf("package %s is under %q, which is not a top-level package of the design card", pkg, from)
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
			if !contains(rule, to) {
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

// TestModelIsStandardLibraryOnly checks model's whole dependency closure.
func TestModelIsStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, module+"/model").CombinedOutput()
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

// testOnlyPackages are the fakes and test helpers: real programs and
// packages the tests build and start, never part of the product.
var testOnlyPackages = []string{
	"dispatch/fakeagent", "dispatch/dispatchtest", "dispatch/agentshim",
	"gates/fakeauthority", "gates/gatestest",
	"facade/mcpfloor",
	"persistence/persistencetest",
}

// The relay binary links no test code: neither the testing package (its
// flags and runtime hooks) nor any fake or test helper.
func TestRelayBinaryHasNoTestCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/relay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, bad := range append([]string{"testing"}, testOnlyPackages...) {
		if bad != "testing" {
			bad = module + "/" + bad
		}
		if contains(deps, bad) {
			t.Errorf("the relay binary depends on %s", bad)
		}
	}
}

// The product's core packages read no config file: the TOML library is
// linked only by the command that loads config.toml (cmd/relay/config).
// The same check for net/http (the status table leaving spec for the
// socket API) is added with that move.
func TestCoreHasNoConfigParser(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", module+"/gates", module+"/machine", module+"/spec").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, bad := range []string{"github.com/BurntSushi/toml"} {
		if contains(deps, bad) {
			t.Errorf("gates, machine or spec depends on %s", bad)
		}
	}
}
