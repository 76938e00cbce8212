//go:build linux

package socketapi

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerCred returns the uid and pid of the process at the other end of a
// Unix-socket connection, as the kernel recorded them at connect() time
// (SO_PEERCRED). It is the server's default uid check.
func PeerCred(c net.Conn) (uid, pid int, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, -1, fmt.Errorf("peer credentials: %T is not a socket connection", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, -1, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		serr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, -1, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return -1, -1, fmt.Errorf("peer credentials: SO_PEERCRED: %w", serr)
	}
	return int(cred.Uid), int(cred.Pid), nil
}
