// Command agentshim is the relay's agent shim (dispatch/agentshim) as a
// program of its own, for dispatch's tests; the relay binary runs the same
// code as its hidden `__agent-shim` subcommand; its first argument
// sandbox.ExecCommand runs the sandbox's Landlock step instead, as the relay
// binary's hidden subcommand of that name does.
package main

import (
	"os"

	"github.com/hai-relay/relay/dispatch/agentshim"
	"github.com/hai-relay/relay/dispatch/sandbox"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ExecCommand {
		sandbox.Exit(os.Args[2:])
	}
	agentshim.Exit(os.Args[1:])
}
