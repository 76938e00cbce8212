package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/gates/gatestest"
)

// Homes the relay does not own. The daemon
// refuses another user's home, or a home holding a link or another user's
// file where its own files go, before it opens, reads or runs anything
// there; the clients (operator CLI, MCP facade) refuse such a home too,
// and a socket served by another uid, before they send a byte; autostart
// starts nothing there. Every case uses a real other uid (nobody), so the
// tests need root (CI runs as root) and skip otherwise.

// fakeDaemonEnv makes the test binary a fake daemon (see TestMain): it
// answers every request on the socket like a daemon of API version
// socketapi.APIVersion, from any uid, and prints each request it got.
const fakeDaemonEnv = "RELAY_TEST_FAKE_DAEMON"

// fakeDaemonMain serves HTTP on $RELAY_TEST_FAKE_DAEMON: a socket path to
// listen on, or "fd" for a socket bound by the parent and passed as fd 3
// (it calls listen(2) itself, so its uid is what SO_PEERCRED reports).
// It prints READY, then one "REQUEST method path" line per request.
func fakeDaemonMain() int {
	var (
		ln  net.Listener
		err error
	)
	if where := os.Getenv(fakeDaemonEnv); where == "fd" {
		if err = syscall.Listen(3, 16); err == nil {
			ln, err = net.FileListener(os.NewFile(3, "relay.sock"))
		}
	} else {
		ln, err = net.Listen("unix", where)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake daemon:", err)
		return 1
	}
	var mu sync.Mutex
	fmt.Println("READY")
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Printf("REQUEST %s %s\n", r.Method, r.URL.Path)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/version" {
			fmt.Fprintf(w, `{"version":"fake","api":%d}`, socketapi.APIVersion)
			return
		}
		// A forged answer: an empty listing.
		fmt.Fprint(w, `{"tasks":[],"messages":[],"agents":[],"unread":0}`)
	}))
	return 0
}

// needOtherUID skips unless the test can run a process as nobody.
func needOtherUID(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test gives files to, and runs a process as, another uid (nobody)")
	}
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := probe.Run(); err != nil {
		t.Skipf("cannot run a process as uid %d: %v", nobody, err)
	}
}

// fakeDaemon is a fake daemon run as nobody.
type fakeDaemon struct {
	out *syncBuffer
}

// requests lists the requests the fake got.
func (f *fakeDaemon) requests() []string {
	var rs []string
	sc := bufio.NewScanner(strings.NewReader(f.out.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "REQUEST ") {
			rs = append(rs, sc.Text())
		}
	}
	return rs
}

// startFakeDaemon runs the fake daemon as nobody, listening on sock (or on
// the bound socket file passed as fd 3 when bound is set) and waits until
// it is ready. Cleanup kills it.
func startFakeDaemon(t *testing.T, sock string, bound *os.File) *fakeDaemon {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runnableBy(t, exe)
	cmd := exec.Command(exe)
	where := sock
	if bound != nil {
		where = "fd"
		cmd.ExtraFiles = []*os.File{bound}
	}
	cmd.Env = append(os.Environ(), fakeDaemonEnv+"="+where)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	f := &fakeDaemon{out: &syncBuffer{}}
	var errb syncBuffer
	cmd.Stdout, cmd.Stderr = f.out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	eventually(t, "the fake daemon to listen", 30*time.Second, func() bool {
		if strings.Contains(errb.String(), "fake daemon:") {
			t.Fatalf("fake daemon: %s", errb.String())
		}
		return strings.Contains(f.out.String(), "READY")
	})
	return f
}

// homeEntry is what a snapshot records of one path in a home.
type homeEntry struct {
	mode   os.FileMode
	uid    uint32
	data   string // a regular file's bytes
	target string // a link's target
}

// snapshotTree records every path under dir (dir included): mode, owner,
// bytes and link targets, links not followed.
func snapshotTree(t *testing.T, dir string) map[string]homeEntry {
	t.Helper()
	out := map[string]homeEntry{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		e := homeEntry{mode: fi.Mode(), uid: fi.Sys().(*syscall.Stat_t).Uid}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.data = string(b)
		case fi.Mode()&os.ModeSymlink != 0:
			e.target, _ = os.Readlink(p)
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails unless dir is exactly as snapshotted.
func sameTree(t *testing.T, dir string, before map[string]homeEntry) {
	t.Helper()
	after := snapshotTree(t, dir)
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			t.Errorf("%s was removed", p)
		case a.mode != b.mode || a.uid != b.uid:
			t.Errorf("%s changed: mode %v uid %d → mode %v uid %d", p, b.mode, b.uid, a.mode, a.uid)
		case a.data != b.data:
			t.Errorf("%s was rewritten (%d bytes → %d)", p, len(b.data), len(a.data))
		case a.target != b.target:
			t.Errorf("link %s now points to %s (was %s)", p, a.target, b.target)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// victimFile is a root-owned file outside the home that a planted link
// points at; it must never change.
func victimFile(t *testing.T) (path, content string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "precious")
	content = "root's precious file\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

func mustBe(t *testing.T, path, content string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != content {
		t.Errorf("%s changed: %q, %v; want %q", path, b, err, content)
	}
}

// lines counts the lines of a file (0 when it does not exist).
func lines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// TestReliabilityDaemonRefusesAForeignHome: `relay daemon` run as root on
// a home nobody owns (with a task waiting for its gates and relay.lock
// planted as a link to a root file) refuses at once, naming the path and
// the owner; the home's files are byte-identical, the linked file is
// untouched and the home's authority adapter did not run.
func TestReliabilityDaemonRefusesAForeignHome(t *testing.T) {
	t.Parallel()
	needOtherUID(t)
	auth := gatestest.BuildFakeAuthority(t)
	authLog := filepath.Join(t.TempDir(), "authority.log")
	home := newHome(t, fmt.Sprintf("[authority]\ncommand = [%q, \"-log\", %q, \"-delay\", \"20s\", \"allow-guarded\"]\ntimeout = \"60s\"\n\n[agents.codex]\ncommand = [%q]\n",
		auth, authLog, dispatchtest.BuildFakeAgent(t)))

	// A task left submitted: its authority call is under way when the
	// daemon is killed, so a restart resumes it (runs the adapter again).
	d := launchDaemon(t, home)
	go func() {
		c := apiClient(home)
		_, _ = apiTry(c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{
			"target": "codex", "prompt": "wait for me", "mission_id": "M-1", "lease_id": "S-1", "cwd": home}))
	}()
	eventually(t, "the authority consulted", 30*time.Second, func() bool { return lines(authLog) == 1 })
	d.stop(t, syscall.SIGKILL)

	victim, content := victimFile(t)
	lock := filepath.Join(home, "relay.lock")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, lock); err != nil {
		t.Fatal(err)
	}
	chownTree(t, home, nobody)
	t.Cleanup(func() { chownTree(t, home, 0) })
	before := snapshotTree(t, home)
	runs := lines(authLog)

	out, _ := refuseStart(t, home, 0, "is owned by uid 65534")
	if !strings.Contains(out, home) {
		t.Errorf("the refusal does not name the home %s:\n%s", home, out)
	}
	sameTree(t, home, before)
	mustBe(t, victim, content)
	if n := lines(authLog); n != runs {
		t.Errorf("the home's authority adapter ran %d time(s) as root", n-runs)
	}
	t.Logf("refusal:\n%s", out)
}

// TestReliabilityDaemonRefusesPlantedFiles: in a home of its own, the
// daemon refuses a link or another user's file where one of its files
// goes, touching nothing; a home that is itself a link is refused; an own
// home open to others is made 0700, and the log says so.
func TestReliabilityDaemonRefusesPlantedFiles(t *testing.T) {
	t.Parallel()
	needOtherUID(t)
	for _, name := range []string{"relay.lock", "relay.log", "relay.log.1", "config.toml", "relay.db", "relay.db-wal", "relay.sock"} {
		t.Run("link "+name, func(t *testing.T) {
			t.Parallel()
			home := newHome(t, "")
			victim, content := victimFile(t)
			if err := os.Symlink(victim, filepath.Join(home, name)); err != nil {
				t.Fatal(err)
			}
			before := snapshotTree(t, home)
			out, _ := refuseStart(t, home, 0, filepath.Join(home, name)+" is a symbolic link")
			sameTree(t, home, before)
			mustBe(t, victim, content)
			t.Logf("%s", out)
		})
	}
	for _, name := range []string{"relay.log", "config.toml", "relay.db"} {
		t.Run("nobody's "+name, func(t *testing.T) {
			t.Parallel()
			home := newHome(t, "")
			p := filepath.Join(home, name)
			if err := os.WriteFile(p, []byte("nobody's\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			before := snapshotTree(t, home)
			refuseStart(t, home, 0, p+" is owned by uid 65534")
			sameTree(t, home, before)
		})
	}
	t.Run("home is a link", func(t *testing.T) {
		t.Parallel()
		real := newHome(t, "")
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		before := snapshotTree(t, real)
		refuseStart(t, link, 0, link+" is a symbolic link")
		sameTree(t, real, before)
	})
	t.Run("own home open to others is fixed", func(t *testing.T) {
		t.Parallel()
		home := newHome(t, "")
		if err := os.Chmod(home, 0o777); err != nil {
			t.Fatal(err)
		}
		d := launchDaemon(t, home)
		if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("home mode %v, %v; want 0700", fi.Mode().Perm(), err)
		}
		d.stop(t, syscall.SIGTERM)
		log, _ := os.ReadFile(filepath.Join(home, "relay.log"))
		if !bytes.Contains(log, []byte(`"mode_was":"0777"`)) || !bytes.Contains(log, []byte(`"mode_now":"0700"`)) {
			t.Errorf("relay.log does not say the home's mode was fixed:\n%s", log)
		}
	})
}

// TestReliabilityClientsRefuseAForeignHome: on a home nobody owns (a
// shared --home under /tmp) where a fake daemon run as nobody answers
// anyone, the operator CLI and the MCP facade refuse with
// daemon_unavailable naming the owner, send the fake nothing, and the
// facade's autostart starts no daemon there.
func TestReliabilityClientsRefuseAForeignHome(t *testing.T) {
	t.Parallel()
	needOtherUID(t)
	home := newHome(t, "")
	if err := os.Chmod(home, 0o777); err != nil { // a shared home
		t.Fatal(err)
	}
	chownTree(t, home, nobody)
	t.Cleanup(func() { chownTree(t, home, 0) })
	runnableBy(t, home+"/x")
	fake := startFakeDaemon(t, sockPath(home), nil)
	before := snapshotTree(t, home)

	_, errOut, code := cli(t, home, "tasks", "list")
	if code != 5 || !strings.Contains(errOut, "daemon_unavailable") || !strings.Contains(errOut, "owned by uid 65534") || !strings.Contains(errOut, "hint: ") {
		t.Errorf("tasks list on nobody's home: exit %d\n%s", code, errOut)
	}
	_, errOut, code = cli(t, home, "mcp", "--as", "claude")
	if code != 5 || !strings.Contains(errOut, "daemon_unavailable") || !strings.Contains(errOut, "owned by uid 65534") {
		t.Errorf("mcp on nobody's home: exit %d\n%s", code, errOut)
	}
	_, errOut, code = cli(t, home, "audit", "verify")
	if code == 0 || !strings.Contains(errOut, "owned by uid 65534") {
		t.Errorf("audit verify on nobody's home: exit %d\n%s", code, errOut)
	}
	if rs := fake.requests(); len(rs) > 0 {
		t.Errorf("the clients talked to the fake daemon: %v", rs)
	}
	if ds := daemonsFor(home); len(ds) > 0 {
		t.Errorf("a daemon was started on nobody's home: %v", ds)
	}
	sameTree(t, home, before)
	t.Logf("refusal:\n%s", errOut)
}

// TestReliabilityClientsRefuseASocketOfAnotherUID: in a home of the
// user's own, a socket served by another uid (nobody) is refused by the
// operator CLI and by the MCP facade (daemon_unavailable naming the uid)
// before anything is sent, and autostart starts no daemon over it.
func TestReliabilityClientsRefuseASocketOfAnotherUID(t *testing.T) {
	t.Parallel()
	needOtherUID(t)
	home := newHome(t, "")
	// The socket file is bound by this test (as root) and passed to the
	// fake, which calls listen(2) as nobody: SO_PEERCRED reports nobody.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sockPath(home)}); err != nil {
		t.Fatal(err)
	}
	bound := os.NewFile(uintptr(fd), "relay.sock")
	fake := startFakeDaemon(t, "", bound)
	bound.Close()
	t.Cleanup(func() { os.Remove(sockPath(home)) })

	_, errOut, code := cli(t, home, "tasks", "list")
	if code != 5 || !strings.Contains(errOut, "daemon_unavailable") || !strings.Contains(errOut, "served by uid 65534") || !strings.Contains(errOut, "hint: ") {
		t.Errorf("tasks list with nobody's socket: exit %d\n%s", code, errOut)
	}
	c := startFacade(t, home, "claude")
	r := mustCode(t, c, "list_agents", nil, "daemon_unavailable")
	if !strings.Contains(r.str("message"), "served by uid 65534") {
		t.Errorf("facade refusal does not name the uid: %s", r.text)
	}
	mustCode(t, c, "check_inbox", nil, "daemon_unavailable")
	if rs := fake.requests(); len(rs) > 0 {
		t.Errorf("the clients talked to nobody's daemon: %v", rs)
	}
	if ds := daemonsFor(home); len(ds) > 0 {
		t.Errorf("a daemon was started over nobody's socket: %v", ds)
	}
	t.Logf("refusal: %s", r.text)
}

// homeWithSocketPath returns a fresh home whose socket path is exactly n
// bytes long.
func homeWithSocketPath(t *testing.T, n int) string {
	t.Helper()
	base := t.TempDir()
	pad := n - len(base) - len("/") - len("/relay.sock")
	if pad < 1 {
		t.Skipf("the temp dir %s is too long for a %d-byte socket path", base, n)
	}
	home := filepath.Join(base, strings.Repeat("h", pad))
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if l := len(sockPath(home)); l != n {
		t.Fatalf("socket path is %d bytes, want %d", l, n)
	}
	return home
}

// TestReliabilityDaemonRefusesALongSocketPath: a home whose socket path
// is over the kernel's limit (107 bytes on Linux: sun_path is 108 with its
// NUL) makes `relay daemon` refuse before it opens the database, with
// invalid_args (exit 2) naming the socket path, its length and the limit,
// a hint to use a shorter --home or RELAY_HOME, and the same refusal in
// relay.log; a socket path of exactly the limit is served.
func TestReliabilityDaemonRefusesALongSocketPath(t *testing.T) {
	t.Parallel()
	home := homeWithSocketPath(t, 108)
	cmd := exec.Command(relayBin, "daemon", "--home", home)
	cmd.Env = append(os.Environ(), fastExit...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the daemon did not refuse within 30 s:\n%s", errb.String())
	}
	out := errb.String()
	sock := sockPath(home)
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("exit %d, want 2 (invalid_args)", code)
	}
	for _, want := range []string{"relay: invalid_args: ", sock, "is 108 bytes", "at most 107 bytes", "\nhint: ", "--home", "RELAY_HOME"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "relay.db")); !os.IsNotExist(err) {
		t.Errorf("the database was opened before the socket path was checked: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(home, "relay.log"))
	var logged bool
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, sock) && strings.Contains(line, "is 108 bytes") &&
			strings.Contains(line, `"code":"invalid_args"`) && strings.Contains(line, "RELAY_HOME") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("relay.log has no error line naming the socket path, its length, the code and the hint:\n%s", log)
	}
	t.Logf("refusal:\n%s", out)

	// The limit itself is served.
	d := launchDaemon(t, homeWithSocketPath(t, 107))
	d.stop(t, syscall.SIGTERM)
}
