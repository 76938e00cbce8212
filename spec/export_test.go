package spec

import (
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
)

// Test-only API: the machine takes the edges from Lifecycle itself; the
// tests look one up with Next.

// Next returns the destination of trigger from state, if the lifecycle has
// that edge.
func Next(from model.State, trigger model.Trigger) (model.State, bool) {
	for _, e := range Lifecycle() {
		if e.From == from && e.Trigger == trigger {
			return e.To, true
		}
	}
	return "", false
}

// GatesMarkdown is the gate table as a Markdown list, the form every gate
// list in the docs takes (README.md, docs/authority.md, between
// <!-- gates --> markers; TestDocsGateLists renders and checks them).
// Documentation is rendered by the tests, as spec/errors.md is, so it
// lives here.
func GatesMarkdown() string {
	var b strings.Builder
	for i, g := range Gates() {
		codes := make([]string, len(g.Codes))
		for j, c := range g.Codes {
			codes[j] = "`" + string(c) + "`"
		}
		fmt.Fprintf(&b, "%d. `%s`: %s (%s).\n", i+1, g.Gate, g.Checks, strings.Join(codes, ", "))
	}
	return b.String()
}
