//go:build !relaytest

package main

import (
	"log/slog"
	"time"

	"github.com/hai-relay/relay/dispatch"
)

// A release build has no test switch: the environment variables a test
// build reads (testswitch_relaytest.go) change nothing here, and their
// names are not in the binary.

var testAutostartTaken []string

func testShim() []string { return nil }

func testDispatchOptions(*dispatch.Options, *slog.Logger) {}

func testIdleStep() time.Duration { return 0 }
