package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is whether the sandbox can run on this machine, for this user.
type Status struct {
	// OK: bubblewrap made its namespaces and ran a program in them.
	OK bool `json:"ok"`
	// Bwrap is bubblewrap's executable ("" when not found).
	Bwrap string `json:"bwrap,omitempty"`
	// Landlock is the kernel's Landlock ABI version (0: none; the
	// bubblewrap layer still holds writes and signals).
	Landlock int `json:"landlock"`
	// Problem says why the sandbox cannot run; Fix, what to do about it.
	Problem string `json:"problem,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// Layers names the layers the status holds, for messages and `relay agents`.
func (s Status) Layers() string {
	if !s.OK {
		return "none: " + s.Problem
	}
	if s.Landlock == 0 {
		return "bubblewrap (no Landlock in this kernel)"
	}
	return "bubblewrap + Landlock ABI " + strconv.Itoa(s.Landlock)
}

// checkTTL is how long a successful check is trusted; a failed one is
// always tried again, so that installing bubblewrap takes effect at once.
const checkTTL = time.Minute

var (
	checkMu   sync.Mutex
	checkLast Status
	checkAt   time.Time
	checkBin  string
)

// Check runs bubblewrap (bwrap, looked up through lookPath) once, with the
// namespaces a task's sandbox makes, and says whether it can run here and,
// if not, why and what to do. A success is kept for a minute.
func Check(bwrap string, lookPath func(string) (string, error)) Status {
	checkMu.Lock()
	defer checkMu.Unlock()
	if checkLast.OK && checkBin == bwrap && time.Since(checkAt) < checkTTL {
		return checkLast
	}
	checkLast, checkAt, checkBin = check(bwrap, lookPath), time.Now(), bwrap
	return checkLast
}

func check(bwrap string, lookPath func(string) (string, error)) Status {
	st := Status{Landlock: LandlockABI()}
	path, err := lookPath(bwrap)
	if err != nil {
		st.Problem = "bubblewrap (bwrap) is not installed, or not on the daemon's PATH"
		st.Fix = "install bubblewrap (Debian, Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap; Arch: sudo pacman -S bubblewrap), then run the task again"
		return st
	}
	st.Bwrap = path
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := Plan{UID: os.Geteuid(), GID: os.Getegid()}
	argv := p.Command(path, []string{"/bin/sh", "-c", "exit 0"})
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
		}
		st.Problem = "bubblewrap cannot make the sandbox's namespaces: " + firstLine(why)
		st.Fix = userNSFix()
		return st
	}
	st.OK = true
	return st
}

// userNSFix says how to let bubblewrap make user namespaces on this
// machine, from what its kernel settings say.
func userNSFix() string {
	if v, err := readInt("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && v == 0 {
		return "unprivileged user namespaces are off: sudo sysctl -w kernel.unprivileged_userns_clone=1 (and the same line in /etc/sysctl.d/ to keep it)"
	}
	if v, err := readInt("/proc/sys/user/max_user_namespaces"); err == nil && v == 0 {
		return "user namespaces are limited to 0: sudo sysctl -w user.max_user_namespaces=15000 (and the same line in /etc/sysctl.d/ to keep it)"
	}
	if v, err := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && v == 1 {
		return "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): give bubblewrap a profile that allows them " +
			"(/etc/apparmor.d/bwrap: `abi <abi/4.0>, include <tunables/global> profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }`, " +
			"then sudo systemctl reload apparmor)"
	}
	return "check that bubblewrap runs for your user: bwrap --unshare-user --unshare-pid --ro-bind / / --dev /dev --proc /proc /bin/true"
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// ErrUnavailable marks a start refused because the sandbox cannot run.
var ErrUnavailable = errors.New("the sandbox cannot run")

// Unavailable returns the error of a start refused for st.
func (s Status) Unavailable() error {
	return fmt.Errorf("%w: %s", ErrUnavailable, s.Problem)
}
