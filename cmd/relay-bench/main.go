// Command relay-bench is HAI-Relay's benchmark suite (BENCHMARKS.md): each
// row measures the relay and a floor in the same run and reports their
// ratio. It is test tooling, not part of the relay: it drives the relay only
// as a user would, starting the real `relay` binary (built from the source,
// or --relay) on homes of its own, talking MCP to `relay mcp` over stdio and
// to the daemon through the socket client, and it builds its floors from
// cmd/testfakes. The store row and the scale row's seeding use the store
// directly (persistence, persistencetest), as the benchmarks of the store do.
//
//	go run ./cmd/relay-bench --help
//	go run ./cmd/relay-bench --rows store,send --json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"unicode/utf8"
)

// The relay home's files the suite touches: it seeds the database of a
// home before starting its daemon, and reaches the daemon on its socket.
const (
	homeDB     = "relay.db"
	homeSocket = "relay.sock"
)

// cliIO is where the suite writes: results on stdout, progress on stderr.
type cliIO struct {
	stdout, stderr io.Writer
}

// errUsage marks a usage error already explained on stderr.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runSuite(ctx, &cliIO{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "relay-bench: %v\n", err)
		os.Exit(1)
	}
}

// usageError explains a bad flag value on stderr.
func usageError(e *cliIO, format string, args ...any) error {
	fmt.Fprintf(e.stderr, "relay-bench: "+format+"\n", args...)
	return errUsage
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints aligned columns, each cell on one line and cut to 60
// characters ("-" when empty).
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		c = strings.ReplaceAll(c, "\n", " ")
		if utf8.RuneCountInString(c) > 60 {
			c = string([]rune(c)[:59]) + "…"
		}
		if c == "" {
			c = "-"
		}
		cols[i] = c
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
