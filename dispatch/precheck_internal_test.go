package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RefuseIfExists's "{cwd}/" patterns are tried above the directory the cwd
// resolves to, not above a symlink's name for it.
func TestPrecheckResolvesCwd(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(root, "real", "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(root, "real", "policy.toml")
	mustWrite(t, planted, "")
	link := filepath.Join(root, "link")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	r := &Rule{RefuseIfExists: []string{"{cwd}/*.toml"}}
	if why := r.precheck(link); !strings.Contains(why, planted) {
		t.Errorf("precheck(%s) = %q, want %s named", link, why, planted)
	}
	if why := r.precheck(filepath.Join(root, "nope")); why == "" {
		t.Error("a cwd that does not resolve passed the precheck")
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
