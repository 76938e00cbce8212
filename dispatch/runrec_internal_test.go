package dispatch

import (
	"testing"
)

func TestValidFileName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"T-01HX", "a.b", "x_y-z"} {
		if !validFileName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00b", ".tmp-1"} {
		if validFileName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
