//go:build race

package main

// raceEnabled builds the relay under test with -race when the tests run
// with it, so end-to-end runs check the daemon for races too.
const raceEnabled = true
