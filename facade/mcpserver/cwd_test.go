package mcpserver

import (
	"os"
	"path/filepath"
	"testing"
)

// The facade's default cwd is the path the relay stores: its symlinks
// resolved (os.Getwd answers $PWD, which may name a symlink).
func TestDefaultCwdIsCanonical(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	project := filepath.Join(root, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	o, err := Options{Agent: "codex", Cwd: link}.withDefaults()
	if err != nil || o.Cwd != project {
		t.Errorf("default cwd = %q, %v; want %q", o.Cwd, err, project)
	}
}
