package hardening

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/supervisor"
)

// opencodeMasks are the masks of OpenCode's profile: its plugins and
// configuration in the cwd and every directory above it.
var opencodeMasks = []Mask{{Dir: "{cwd}", Names: []string{".opencode", "opencode.json", "opencode.jsonc"}}}

func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: bubblewrap is needed (scripts/test installs it)")
		}
		t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
}

// maskPrefixes are the two ways masks are applied: over the host's root
// as it is (maskArgv, rw) and over a read-only root, as the sandbox binds
// it (maskBinds, not rw).
func maskPrefixes(t *testing.T, masks []Mask, cwd string) map[string][]string {
	t.Helper()
	rw, err := maskArgv(masks, cwd, "")
	if err != nil {
		t.Fatal(err)
	}
	binds, tail, err := maskBinds(masks, cwd, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ro := append(append([]string{"bwrap", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"}, binds...), tail...)
	return map[string][]string{"rw": rw, "ro": ro}
}

// startMasked starts sh -c script under prefix, its output in out. It
// starts it as the dispatcher does, from a thread that lives until the
// test ends: bwrap --die-with-parent dies with the thread that forked it.
func startMasked(t *testing.T, prefix []string, script string, out *strings.Builder) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, prefix[0], append(slices.Clip(prefix[1:]), "--", "sh", "-c", script)...)
	cmd.Stdout, cmd.Stderr = out, out
	starter := supervisor.NewStarter()
	t.Cleanup(starter.Stop)
	if err := starter.Start(cmd); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// runMasked runs sh -c script under prefix and returns its output.
func runMasked(t *testing.T, prefix []string, script string) string {
	t.Helper()
	var out strings.Builder
	if err := startMasked(t, prefix, script, &out).Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return out.String()
}

// seesScript prints "path=exists" or "path=missing" for each path.
func seesScript(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "if [ -e %[1]q ] || [ -L %[1]q ]; then echo %[1]q=exists; else echo %[1]q=missing; fi; ", p)
	}
	return b.String()
}

// checkSees fails t for each path whose state in out (seesScript's
// output) is not want's.
func checkSees(t *testing.T, out string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, f := range strings.Fields(out) {
		p, state, _ := strings.Cut(f, "=")
		got[p] = state
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("the agent sees %s %q, want %s (output %q)", p, got[p], w, out)
		}
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

// plant writes OpenCode's plugin and configuration into dir.
func plant(t *testing.T, dir string) []string {
	t.Helper()
	plugin := filepath.Join(dir, ".opencode", "plugins", "evil.js")
	config := filepath.Join(dir, "opencode.json")
	mustWrite(t, plugin, "export default async () => { throw new Error('planted') }")
	mustWrite(t, config, `{"plugin": ["evil"]}`)
	return []string{filepath.Join(dir, ".opencode"), plugin, config}
}

// A cwd that is a symlink to a project, or that is reached through a
// symlinked parent, is masked where it resolves to: the project's planted
// plugin and configuration are hidden by whichever path the agent names
// them, and so are those above the project; its other files are seen.
func TestMaskSymlinkedCwd(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	above := filepath.Join(root, "real")
	project := filepath.Join(above, "project")
	mustWrite(t, filepath.Join(project, "visible.txt"), "x")
	planted := append(plant(t, project), plant(t, above)...)
	link := filepath.Join(root, "link")     // → real/project
	parent := filepath.Join(root, "parent") // → real
	for p, target := range map[string]string{link: project, parent: above} {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for name, cwd := range map[string]string{"symlinked cwd": link, "symlinked parent": filepath.Join(parent, "project")} {
		want := map[string]string{filepath.Join(project, "visible.txt"): "exists", filepath.Join(cwd, "visible.txt"): "exists"}
		var paths []string
		for _, p := range planted {
			want[p] = "missing"
			paths = append(paths, p)
		}
		for _, n := range []string{".opencode", "opencode.json"} {
			want[filepath.Join(cwd, n)] = "missing" // through the link
		}
		for p := range want {
			paths = append(paths, p)
		}
		for mode, prefix := range maskPrefixes(t, opencodeMasks, cwd) {
			out := runMasked(t, prefix, seesScript(paths...))
			t.Run(name+"/"+mode, func(t *testing.T) { checkSees(t, out, want) })
		}
	}
}

// A masked name created in a directory of another uid after the agent
// started, while it runs, is never seen by it: the directory is masked
// like one the relay can write to (a tmpfs, each entry there at the start
// bound back), not covered only where names exist at the start.
func TestMaskForeignDirLateName(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give the project to another uid")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(root, "foreign")
	mustWrite(t, filepath.Join(project, "visible.txt"), "x")
	if err := os.Symlink(project, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{project, filepath.Join(project, "visible.txt")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(project, 0o755); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(root, "link")
	for _, mode := range []string{"rw", "ro"} {
		before := filepath.Join(project, "before-"+mode)
		if err := os.Mkdir(before, 0o755); err != nil { // there at the start: seen
			t.Fatal(err)
		}
		prefix := maskPrefixes(t, opencodeMasks, cwd)[mode]
		if slices.ContainsFunc(prefix, func(a string) bool {
			return strings.HasPrefix(a, filepath.Join(project, "opencode")) ||
				strings.HasPrefix(a, filepath.Join(project, ".opencode"))
		}) {
			t.Fatalf("%s: the prefix names a name planted later: %q", mode, prefix)
		}
		var out strings.Builder
		cmd := startMasked(t, prefix, "sleep 2; ls -a "+project+"; ls -a "+cwd+"/", &out)
		time.Sleep(time.Second)
		// Planted by the project's owner (root can write any directory;
		// the owner is what makes it foreign), 1 s after the start.
		var made []string
		for _, p := range []string{filepath.Join(project, "opencode.json"), filepath.Join(project, ".opencode", "plugins", "evil.js")} {
			mustWrite(t, p, "planted")
			made = append(made, p)
		}
		made = append(made, filepath.Join(project, ".opencode"), filepath.Join(project, ".opencode", "plugins"))
		for _, p := range made {
			if err := os.Lchown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v: %s", mode, err, out.String())
		}
		seen := strings.Fields(out.String())
		for _, n := range []string{"opencode.json", ".opencode"} {
			if slices.Contains(seen, n) {
				t.Errorf("%s: the agent sees %s, planted 1 s after it started: %q", mode, n, seen)
			}
		}
		for _, n := range []string{"visible.txt", filepath.Base(before)} {
			if c := strings.Count(" "+strings.Join(seen, " ")+" ", " "+n+" "); c != 2 {
				t.Errorf("%s: the agent sees %s %d times, want 2 (by both paths): %q", mode, n, c, seen)
			}
		}
		for _, p := range made {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The arguments' shape: outermost directory first, never a tmpfs over /,
// entries bound back read-only and the tmpfs made read-only unless rw,
// masked names never bound back, and every directory canonical.
func TestMaskBindsShape(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(root, "project")
	plant(t, project)
	mustWrite(t, filepath.Join(project, "visible.txt"), "x")
	if err := os.Symlink(project, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	masks := append(slices.Clip(opencodeMasks), Mask{Dir: filepath.Join(root, "link"), Names: []string{"visible.txt"}})
	for _, rw := range []bool{true, false} {
		args, tail, err := maskBinds(masks, filepath.Join(root, "link"), rw, nil)
		args = append(args, tail...)
		if err != nil {
			t.Fatal(err)
		}
		var tmpfs []string
		for i := 0; i < len(args)-1; i++ {
			switch args[i] {
			case "--tmpfs":
				tmpfs = append(tmpfs, args[i+1])
			case "--ro-bind-try", "--dev-bind-try":
				if (args[i] == "--dev-bind-try") != rw {
					t.Errorf("rw %v: %s %s", rw, args[i], args[i+1])
				}
				if base := filepath.Base(args[i+1]); filepath.Dir(args[i+1]) == project &&
					slices.Contains([]string{".opencode", "opencode.json", "visible.txt"}, base) {
					t.Errorf("rw %v: masked %s is bound back", rw, args[i+1])
				}
			}
		}
		if slices.Contains(tmpfs, "/") {
			t.Errorf("rw %v: a tmpfs over /: %q", rw, args)
		}
		if !slices.Equal(tmpfs[len(tmpfs)-2:], []string{root, project}) {
			t.Errorf("rw %v: tmpfs over %q, want ... %s %s (outermost first, canonical, once each)", rw, tmpfs, root, project)
		}
		if got := slices.Contains(args, "--remount-ro"); got == rw {
			t.Errorf("rw %v: --remount-ro present %v", rw, got)
		}
	}
	// A cwd that does not resolve is refused, not masked where it is not.
	if _, _, err := maskBinds(masks, filepath.Join(root, "nope"), false, nil); err == nil {
		t.Error("a cwd that does not exist was masked")
	}
}

// In /, which never takes a tmpfs, a masked name already there is
// covered: a directory by an empty read-only tmpfs, anything else by
// /dev/null; a name that is not there needs nothing (only root creates
// names in /).
func TestMaskCoverNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // stands for /
	if err := os.Mkdir(filepath.Join(dir, ".opencode"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "opencode.json"), "{}")
	args, err := coverNames(dir, []string{".opencode", "opencode.json", "opencode.jsonc"})
	if err != nil {
		t.Fatal(err)
	}
	d, f := filepath.Join(dir, ".opencode"), filepath.Join(dir, "opencode.json")
	want := []string{"--tmpfs", d, "--remount-ro", d, "--dev-bind", "/dev/null", f}
	if !slices.Equal(args, want) {
		t.Errorf("coverNames = %q, want %q", args, want)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "opencode.jsonc")); err != nil {
		t.Fatal(err)
	}
	if _, err := coverNames(dir, []string{"opencode.jsonc"}); err == nil {
		t.Error("a dangling symlink was passed over")
	}
}

// maskArgv returns the bubblewrap command line, up to the "--" before the
// agent's argv, that runs an agent with masks applied for a session in cwd:
// the host's root bound as it is (--dev-bind / /), then maskBinds with rw
// set: the masks alone, without the sandbox's read-only root.
func maskArgv(masks []Mask, cwd, _ string) ([]string, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("bubblewrap (bwrap) is needed to hide the paths the profile masks: %w", err)
	}
	out := []string{bwrap, "--die-with-parent", "--dev-bind", "/", "/"}
	if os.Geteuid() != 0 {
		out = append(out, "--unshare-user", "--uid", strconv.Itoa(os.Geteuid()), "--gid", strconv.Itoa(os.Getegid()))
	}
	binds, _, err := maskBinds(masks, cwd, true, nil)
	if err != nil {
		return nil, err
	}
	return append(out, binds...), nil
}

// A mask that would hide the agent's own installation gives back only the
// entry that holds it.
func TestAdapterUnderMask(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home", "u")
	cwd := filepath.Join(home, "src", "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	masks := []Mask{{Dir: "{cwd}", Names: []string{".hermes"}}}
	for _, c := range []struct{ real, want string }{
		{home + "/.hermes/hermes-agent/venv/bin/hermes", home + "/.hermes/hermes-agent"},
		{home + "/.hermes/hermes", home + "/.hermes/hermes"},
		{home + "/.local/bin/hermes", ""},
		{home + "/.hermesx/bin/hermes", ""},
		{"/opt/.hermes/bin/hermes", ""}, // not above the cwd
		{"", ""},
	} {
		if got := adapterUnderMask(masks, cwd, c.real); got != c.want {
			t.Errorf("adapterUnderMask(%q) = %q, want %q", c.real, got, c.want)
		}
	}
}

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
	if why := r.Precheck(link); !strings.Contains(why, planted) {
		t.Errorf("precheck(%s) = %q, want %s named", link, why, planted)
	}
	if why := r.Precheck(filepath.Join(root, "nope")); why == "" {
		t.Error("a cwd that does not resolve passed the precheck")
	}
}

// maskBinds expands masks for cwd and returns their mount arguments, as
// PlanLaunch does in two steps.
func maskBinds(masks []Mask, cwd string, rw bool, skip func(dir string) bool) (args, tail []string, err error) {
	m, err := expandMasks(masks, cwd)
	if err != nil {
		return nil, nil, err
	}
	return m.binds(rw, skip)
}

// adapterUnderMask expands masks for cwd and returns what of real's
// installation is bound back.
func adapterUnderMask(masks []Mask, cwd, real string) string {
	m, err := expandMasks(masks, cwd)
	if err != nil {
		return ""
	}
	return m.adapterBind(real)
}
