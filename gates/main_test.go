package gates_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hai-relay/relay/gates/gatestest"
)

// TestMain removes the built fake adapter and fails the run if any
// goroutine outlives the tests (Consult must join everything it starts).
func TestMain(m *testing.M) {
	code := m.Run()
	gatestest.RemoveFakeAuthority()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
