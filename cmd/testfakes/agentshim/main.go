// Command agentshim is the relay's agent shim (dispatch/agentshim) as a
// program of its own, for dispatch's tests; the relay binary runs the same
// code as its hidden `__agent-shim` subcommand.
package main

import (
	"os"

	"github.com/hai-relay/relay/dispatch/agentshim"
)

func main() { agentshim.Exit(os.Args[1:]) }
