//go:build !relaytest

package main

import "log/slog"

// A release build has no test switch (testswitch.go).

var testAutostartTaken []string

func testShim() []string { return nil }

func testUnhardened(*slog.Logger) []string { return nil }
