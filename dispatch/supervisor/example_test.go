package supervisor_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hai-relay/relay/dispatch/supervisor"
)

// Run a one-shot child, bounded: at most 2 s, 1 KiB of stdout kept,
// its group killed and the child reaped when Run returns.
func ExampleRun() {
	r := supervisor.Run(context.Background(),
		supervisor.Spec{Argv: []string{"cat"}, Env: []string{"PATH=/usr/bin:/bin"}},
		[]byte("hello\n"),
		supervisor.Limits{Timeout: 2 * time.Second, Grace: 200 * time.Millisecond, StdoutMax: 1 << 10})
	fmt.Printf("exit %d, timed out %v: %s", r.ExitCode, r.TimedOut, r.Stdout)
	// Output: exit 0, timed out false: hello
}

// Start a long-lived child from a Starter's thread, talk to it over its
// pipes, then stop and reap it.
func ExampleStart() {
	st := supervisor.NewStarter()
	defer st.Stop() // last: it sends the parent-death signal to what still runs
	p, err := supervisor.Start(supervisor.Spec{Argv: []string{"cat"}, Env: []string{"PATH=/usr/bin:/bin"}, Start: st.Start})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = p.Stdin().WriteString("ping\n")
	buf := make([]byte, 5)
	n, _ := io.ReadFull(p.Stdout(), buf)
	fmt.Printf("%s", buf[:n])
	_ = p.Reap() // SIGKILL to the group, then the exit status
	fmt.Println(p.State())
	// Output:
	// ping
	// signal: killed
}
