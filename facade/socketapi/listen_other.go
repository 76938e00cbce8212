//go:build !unix

package socketapi

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

// ErrSocketInUse is returned (wrapped, with the path) by Listen when a live
// server already answers on the socket path.
var ErrSocketInUse = errors.New("a server already answers on this socket")

// SocketPathMax is the longest socket path Listen would take; there is
// none on this system.
const SocketPathMax = 0

// CheckSocketPath refuses every path: the relay's socket is Unix-only.
func CheckSocketPath(sockPath string) error {
	_, err := Listen(sockPath)
	return err
}

// Listen is only supported on Unix systems.
func Listen(sockPath string) (net.Listener, error) {
	return nil, fmt.Errorf("listen on %s: the relay's owner-only Unix socket is not supported on %s", sockPath, runtime.GOOS)
}
