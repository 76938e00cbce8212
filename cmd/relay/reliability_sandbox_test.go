package main

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/gates/gatestest"
)

// sandboxUserEnv names the non-root user the sandbox tests run the relay
// as when the tests run as root (scripts/test creates it); without it,
// the uid 65534 (nobody) is used.
const sandboxUserEnv = "RELAY_TEST_USER"

// runAs is a user the relay runs as in a test.
type runAs struct {
	name     string
	uid, gid int
}

// sandboxUsers are the users the sandbox tests run the relay as: root and
// a normal user when the tests run as root (bubblewrap's user-namespace
// path, the one every user takes), else the user running the tests.
func sandboxUsers(t *testing.T) []runAs {
	if os.Geteuid() != 0 {
		return []runAs{{"as-user", os.Geteuid(), os.Getegid()}}
	}
	other := runAs{"as-user", 65534, 65534}
	if name := os.Getenv(sandboxUserEnv); name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatalf("%s=%s: %v", sandboxUserEnv, name, err)
		}
		other.uid, _ = strconv.Atoi(u.Uid)
		other.gid, _ = strconv.Atoi(u.Gid)
	}
	return []runAs{{"as-root", 0, 0}, other}
}

// openToUser makes the temporary directories holding paths (the paths
// themselves too, when directories) searchable and readable by anyone, so
// that another user can run the programs the tests built in them. Only
// directories under the temporary directory are changed.
func openToUser(t *testing.T, paths ...string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for _, p := range paths {
		for d := filepath.Clean(p); strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() && fi.Mode().Perm()&0o005 != 0o005 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o055); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// chownAll gives the tree at root to u.
func chownAll(t *testing.T, root string, u runAs) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, u.uid, u.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// userCmd returns cmd set to run as u (when u is not the test's own user).
func userCmd(cmd *exec.Cmd, u runAs) *exec.Cmd {
	if u.uid != os.Geteuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	}
	return cmd
}

// A scripted agent that never asks, configured as each of the six agents
// (under its hardening profile) and as a custom agent (under none), in a
// read_only task: it writes nothing outside its scratch (the cwd, its
// parent, the user's shell files, every agent's settings files, the
// host's /tmp, the relay home), and a process it signals outside its
// sandbox lives on. As root and as a normal user: the daemon and the
// facade run as that user.
func TestSandboxHoldsForEveryAgent(t *testing.T) {
	t.Parallel()
	fake := dispatchtest.BuildFakeAgent(t)
	agents := []string{"claude", "codex", "gemini", "cursor", "opencode", "hermes", "custom"}
	for _, u := range sandboxUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			home := filepath.Join(root, "relay-home")
			userHome := filepath.Join(root, "home")
			tasks := filepath.Join(root, "projects")
			for _, d := range []string{home, userHome, tasks} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			// What a user's account holds that an agent must never write.
			guarded := []string{
				filepath.Join(userHome, ".bashrc"), filepath.Join(userHome, ".profile"),
				filepath.Join(userHome, ".claude", "settings.json"), filepath.Join(userHome, ".claude.json"),
				filepath.Join(userHome, ".codex", "config.toml"), filepath.Join(userHome, ".gemini", "settings.json"),
				filepath.Join(userHome, ".hermes", "config.yaml"), filepath.Join(userHome, ".config", "opencode", "opencode.json"),
				filepath.Join(userHome, ".cursor", "cli-config.json"),
			}
			for _, f := range guarded {
				writeFile(t, f, "original\n")
			}
			var cfg strings.Builder
			cfg.WriteString(fullConfig(t, "allow-guarded", ""))
			fmt.Fprintf(&cfg, "[agents.custom]\ncommand = [%q]\n", fake)
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			chownAll(t, root, u)
			openToUser(t, root, relayBin, fake, dispatchtest.FakeAdapter(t, "claude"), gatestest.BuildFakeAuthority(t),
				os.Getenv(envAgentShim))

			outside := exec.Command("sleep", "300")
			if err := outside.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = outside.Process.Kill(); _ = outside.Wait() })

			env := append(os.Environ(), "HOME="+userHome, "TMPDIR="+userHome, "XDG_CONFIG_HOME=", "XDG_DATA_HOME=", "XDG_CACHE_HOME=", "XDG_STATE_HOME=")
			env = append(env, fastExit...)
			daemon := exec.Command(relayBin, "daemon", "--home", home)
			daemon.Env = env
			runDaemonCmd(t, home, userCmd(daemon, u))
			c := userFacade(t, home, "codex", u, env)

			nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
			for _, agent := range agents {
				cwd := filepath.Join(tasks, agent, "cwd")
				if err := os.MkdirAll(cwd, 0o755); err != nil {
					t.Fatal(err)
				}
				chownAll(t, filepath.Join(tasks, agent), u)
				writes := append([]string{
					filepath.Join(cwd, "planted"), filepath.Join(cwd, ".git", "hooks", "pre-commit"),
					filepath.Join(filepath.Dir(cwd), "outside"), filepath.Join(home, "planted"),
					filepath.Join("/tmp", "relay-vandal-"+nonce+"-"+agent), filepath.Join("/var/tmp", "relay-vandal-"+nonce+"-"+agent),
				}, guarded...)
				prompt := "vandal " + strings.Join(writes, " ") + " pid:" + strconv.Itoa(outside.Process.Pid)
				id := mustOK(t, c, "submit_task", map[string]any{"target": agent, "prompt": prompt,
					"mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}).str("task_id")
				r := mustOK(t, c, "get_task", map[string]any{"task_id": id, "wait_seconds": 50})
				if r.str("state") != "completed" {
					t.Errorf("%s %s: %s/%s (%s), want completed", u.name, agent, r.str("state"), r.str("code"), r.str("message"))
					continue
				}
				for _, line := range strings.Split(r.str("result"), "\n") {
					// A write into the sandbox's private /tmp lands in the
					// task's scratch; every other one must fail.
					if strings.HasPrefix(line, "wrote ") && !strings.HasPrefix(line, "wrote /tmp/") || strings.HasPrefix(line, "killed ") {
						t.Errorf("%s %s: the agent %s", u.name, agent, line)
					}
				}
				for _, w := range writes {
					b, err := os.ReadFile(w)
					if err == nil && string(b) != "original\n" {
						t.Errorf("%s %s: %s was written on the host", u.name, agent, w)
					}
				}
				if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
					t.Fatalf("%s %s: the process outside the sandbox died: %v", u.name, agent, err)
				}
			}
		})
	}
}

// userFacade starts `relay mcp --as agent` as u, as an MCP client would,
// and initializes it.
func userFacade(t *testing.T, home, agent string, u runAs, env []string) *client.Client {
	t.Helper()
	tr := transport.NewStdioWithOptions(relayBin, env, []string{"mcp", "--as", agent, "--home", home, "--no-autostart"},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = env
			return userCmd(cmd, u), nil
		}))
	if err := tr.Start(context.Background()); err != nil {
		t.Fatalf("start facade as %s: %v", u.name, err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	ir.Params.ClientInfo = mcp.Implementation{Name: "relay-e2e", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		t.Fatalf("initialize facade as %s: %v", u.name, err)
	}
	return c
}

// apiClientAs is apiClient for a daemon that runs as u. The daemon accepts
// only peers of its own uid, which the kernel records at connect: so the
// connection is made on a locked thread whose effective uid alone is set
// to u's for the connect (credentials are per thread on Linux; the
// runtime's Setresuid would change every thread), then set back.
func apiClientAs(home string, u runAs) *http.Client {
	c := apiClient(home)
	if u.uid == os.Geteuid() {
		return c
	}
	sock := sockPath(home)
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(u.uid), ^uintptr(0)); e != 0 {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("seteuid %d: %w", u.uid, e)
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", sock)
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0)); e != 0 {
			// The thread keeps u's uid: leave it locked, so that it
			// ends with this goroutine and serves nothing else.
			if conn != nil {
				conn.Close()
			}
			return nil, fmt.Errorf("seteuid back to 0: %w", e)
		}
		runtime.UnlockOSThread()
		return conn, err
	}
	return c
}

// cliAs runs a relay command against home as u.
func cliAs(t *testing.T, home string, u runAs, args ...string) (string, string, int) {
	t.Helper()
	cmd := userCmd(exec.Command(relayBin, append(args, "--home", home)...), u)
	cmd.Env = append(os.Environ(), fastExit...)
	return runRelay(t, cmd)
}
