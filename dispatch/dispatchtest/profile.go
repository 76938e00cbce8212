package dispatchtest

import (
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/verify"
)

// ProfileFor returns the agent's hardening profile that covers the adapter
// calling itself pkg at version, or nil: the first of the agent's profiles
// that covers it, as the dispatcher chooses.
func ProfileFor(agent, pkg, version string) *hardening.Profile {
	for _, p := range hardening.ProfilesFor(agent) {
		if p.Covers(pkg, version) {
			return p
		}
	}
	return nil
}

// Violations lists what any attempt of a verification left on disk under
// p: the files created or changed that no attempt may touch.
func Violations(p verify.AttemptPaths) []string {
	var v []string
	for _, a := range verify.AllAttempts() {
		if h := p.Happened(a); h != "" {
			v = append(v, h)
		}
	}
	return v
}
