// Package socketapi is the daemon's HTTP/JSON API over its owner-only Unix
// socket: the server (NewServer, Listen, with SO_PEERCRED checks on every
// connection), the HTTP status of each error code (Status), and the client
// (NewClient), which satisfies model.Service like the in-process service
// and checks that the daemon behind the socket is its own user's.
package socketapi
