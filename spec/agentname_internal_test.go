package spec

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestAgentNameShapeMatchesItsRegexp: the hand-written check accepts exactly
// what [a-z0-9][a-z0-9_-]{0,63} does, over random names from an alphabet
// with every class of character at the edges.
func TestAgentNameShapeMatchesItsRegexp(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	const alphabet = "az09_-AZ.\n é/"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(67))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = "abc019_-"[r.IntN(8)]
			}
		}
		name := string(b)
		if got, want := agentNameShape(name), re.MatchString(name); got != want {
			t.Fatalf("agentNameShape(%q) = %v, the regexp says %v", name, got, want)
		}
	}
}
