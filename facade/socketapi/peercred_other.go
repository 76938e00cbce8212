//go:build !linux

package socketapi

import (
	"fmt"
	"net"
	"runtime"
)

// PeerCred would return the peer's uid and pid of a Unix-socket connection.
// Only Linux (SO_PEERCRED) is supported; elsewhere it fails, so the server
// refuses every connection (fail closed) unless ServerOptions.PeerCred is
// set.
func PeerCred(c net.Conn) (uid, pid int, err error) {
	return -1, -1, fmt.Errorf("peer credentials: SO_PEERCRED is not supported on %s; refusing the connection", runtime.GOOS)
}
