package persistence

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind, such as
// the connection openers of a pool that was never closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
