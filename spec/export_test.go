package spec

import "github.com/hai-relay/relay/model"

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
