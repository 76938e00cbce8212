// Package machine is HAI-Relay's task engine. It builds one
// qmuntal/stateless machine per task operation from the lifecycle table in
// spec, with the task's state kept in the store (external storage), the four
// gates of package gates as the named guards of the authorize transition,
// and dispatch as the entry action of authorized, which runs only after
// authorized is durably stored.
//
// Every operation on a task holds that task's lock, so Fire is serialized
// per task; every state write is a compare-and-set in the store, so a
// transition computed from a stale state is refused with CodeStaleState
// rather than overwriting a newer one.
package machine
