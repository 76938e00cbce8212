//go:build !relaytest

package main

import (
	"log/slog"
	"time"
)

// A release build has no test switch (testswitch.go).

var testAutostartTaken []string

func testShim() []string { return nil }

func testUnhardened(*slog.Logger) []string { return nil }

func testIdleStep() time.Duration { return 0 }
