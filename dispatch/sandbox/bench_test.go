package sandbox_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/sandbox"
)

// BenchmarkStart measures what the sandbox adds to an agent's start: the
// same program (the fake agent's build of the exec step, told to run
// /bin/true) started directly, and through bubblewrap and the Landlock
// exec step as the dispatcher starts every agent, in one run. The
// difference is the sandbox's cost per dispatch (BENCHMARKS.md).
func BenchmarkStart(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatal(err)
	}
	shim := dispatchtest.BuildShim(b)
	scratch := b.TempDir()
	run := func(b *testing.B, argv []string) {
		for b.Loop() {
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
	b.Run("direct", func(b *testing.B) {
		run(b, []string{shim, sandbox.ExecCommand, "--no-landlock", "--", "/bin/true", "true"})
	})
	b.Run("sandboxed", func(b *testing.B) {
		p := sandbox.Plan{Cwd: scratch, Scratch: scratch, HostTmp: true, UID: os.Geteuid(), GID: os.Getegid(),
			Exec: []string{shim, sandbox.ExecCommand}}
		run(b, p.Command(bwrap, []string{"/bin/true"}))
	})
}
