package sandbox_test

import (
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/sandbox"
)

// nobody is the uid and gid the non-root case runs as, unless
// RELAY_TEST_USER names another user.
const nobody = 65534

// The sandbox holds read_only against a program that never asks: it
// writes nothing but its scratch, cannot signal a process outside, and
// this holds as root and as a normal user (bubblewrap's user-namespace
// path, the one every user takes), with Landlock inside and without.
func TestSandboxHoldsReadOnly(t *testing.T) {
	t.Parallel()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bubblewrap is needed (scripts/test installs it): %v", err)
	}
	shim := dispatchtest.BuildShim(t)
	// The shim's build directory is the test binary's; a normal user must
	// be able to run it.
	if err := os.Chmod(filepath.Dir(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outside.Process.Kill(); _ = outside.Wait() })

	type user struct {
		name     string
		uid, gid int
	}
	other := user{"as-user", nobody, nobody}
	if name := os.Getenv("RELAY_TEST_USER"); name != "" { // made by scripts/test
		u, err := osuser.Lookup(name)
		if err != nil {
			t.Fatalf("RELAY_TEST_USER=%s: %v", name, err)
		}
		other.uid, _ = strconv.Atoi(u.Uid)
		other.gid, _ = strconv.Atoi(u.Gid)
	}
	users := []user{{"as-root", 0, 0}, other}
	if os.Geteuid() != 0 {
		users = []user{{"as-user", os.Geteuid(), os.Getegid()}}
	}
	for _, u := range users {
		for _, lock := range []bool{true, false} {
			name := u.name + map[bool]string{true: "/landlock", false: "/namespaces-only"}[lock]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				root := t.TempDir()
				proj, scratch, home := filepath.Join(root, "proj"), filepath.Join(root, "scratch"), filepath.Join(root, "home")
				for _, d := range []string{proj, scratch, home} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(d, u.uid, u.gid); err != nil && os.Geteuid() == 0 {
						t.Fatal(err)
					}
				}
				for _, d := range []string{root, filepath.Dir(root)} { // t.TempDir's and its parent
					if err := os.Chmod(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				plan := sandbox.Plan{Cwd: proj, Scratch: scratch, HostTmp: true, UID: u.uid, GID: u.gid,
					Exec: []string{shim, sandbox.ExecCommand}, NoLandlock: !lock}
				script := `
					for f in "$PROJ/planted" "$HOME/.bashrc" "$ROOT/outside" /var/tmp/relay-sandbox-escape; do
						if echo x > "$f" 2>/dev/null; then echo "WROTE $f"; fi
					done
					if kill -0 "$OUTSIDE" 2>/dev/null; then echo "SIGNALLED $OUTSIDE"; fi
					echo ok > "$TMPDIR/scratch-file" && echo "SCRATCH $TMPDIR"
					echo "PIDS $(ls /proc | grep -c '^[0-9]')"
				`
				argv := plan.Command(bwrap, []string{"/bin/sh", "-c", script})
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "PROJ=" + proj, "ROOT=" + root,
					"OUTSIDE=" + strconv.Itoa(outside.Process.Pid)}
				if u.uid != os.Geteuid() {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
				}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("sandboxed script: %v: %s", err, out)
				}
				got := string(out)
				if strings.Contains(got, "WROTE") || strings.Contains(got, "SIGNALLED") {
					t.Errorf("the sandbox did not hold:\n%s", got)
				}
				if !strings.Contains(got, "SCRATCH "+scratch) {
					t.Errorf("the scratch was not writable as TMPDIR:\n%s", got)
				}
				if b, err := os.ReadFile(filepath.Join(scratch, "scratch-file")); err != nil || string(b) != "ok\n" {
					t.Errorf("scratch file %q, %v", b, err)
				}
				for _, f := range []string{filepath.Join(proj, "planted"), filepath.Join(home, ".bashrc"), filepath.Join(root, "outside"), "/var/tmp/relay-sandbox-escape"} {
					if _, err := os.Lstat(f); err == nil {
						t.Errorf("%s exists on the host", f)
					}
				}
				// Its own pid namespace: the shell, the exec step's
				// successor and ls are all it sees (bubblewrap's init too).
				if i := strings.Index(got, "PIDS "); i < 0 {
					t.Errorf("no pid count:\n%s", got)
				} else if n, _ := strconv.Atoi(strings.Fields(got[i+5:])[0]); n > 5 {
					t.Errorf("the sandbox sees %d processes: not a pid namespace of its own", n)
				}
			})
		}
	}
}

// A private /tmp: the scratch is the sandbox's /tmp, and nothing written
// there reaches the host's.
func TestSandboxPrivateTmp(t *testing.T) {
	t.Parallel()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	name := "relay-private-tmp-" + strconv.Itoa(os.Getpid())
	plan := sandbox.Plan{Cwd: "/", Scratch: scratch, UID: os.Geteuid(), GID: os.Getegid()}
	argv := plan.Command(bwrap, []string{"/bin/sh", "-c", "echo x > /tmp/" + name + " && ls /tmp && echo TMPDIR=$TMPDIR"})
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Lstat("/tmp/" + name); err == nil {
		_ = os.Remove("/tmp/" + name)
		t.Fatal("a file written to the sandbox's /tmp reached the host's")
	}
	if _, err := os.Lstat(filepath.Join(scratch, name)); err != nil {
		t.Errorf("the file is not in the task's scratch: %v (%s)", err, out)
	}
	if strings.TrimSpace(string(out)) != name+"\nTMPDIR=/tmp" {
		t.Errorf("the sandbox's /tmp is not the scratch alone: %q", out)
	}
}

// Check says the sandbox can run here, where bubblewrap is installed.
func TestCheck(t *testing.T) {
	st := sandbox.Check("bwrap", exec.LookPath)
	if !st.OK {
		t.Fatalf("sandbox unavailable: %s (%s)", st.Problem, st.Fix)
	}
	missing := sandbox.Check("no-such-bwrap", exec.LookPath)
	if missing.OK || !strings.Contains(missing.Fix, "apt-get install bubblewrap") {
		t.Errorf("without bubblewrap: %+v", missing)
	}
}
