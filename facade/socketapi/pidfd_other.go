//go:build !linux

package socketapi

import "os"

// openPidfd has no pidfd to return outside Linux: the peer's start time
// (procStart) is then what tells its process from a later one.
func openPidfd(int) *os.File { return nil }

// pidfdAlive cannot tell outside Linux.
func pidfdAlive(*os.File) (alive, ok bool) { return false, false }
