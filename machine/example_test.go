package machine_test

import (
	"fmt"
	"strings"

	"github.com/hai-relay/relay/machine"
)

// The lifecycle graph is rendered from the same definition the engine
// runs: the authorize edge carries the four guards, in evaluation order.
func ExampleGraph() {
	for _, line := range strings.Split(machine.Graph(), "\n") {
		if strings.HasPrefix(line, "\tsubmitted -> authorized") {
			i := strings.Index(line, "authorize [")
			fmt.Println(line[i:strings.Index(line, "</TD>")])
		}
	}
	// Output: authorize [missionLease] [delegation] [acpDenial] [authority] [guardedClaude]
}
