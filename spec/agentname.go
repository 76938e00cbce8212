package spec

import "github.com/hai-relay/relay/model"

// agentNameShape reports whether name matches [a-z0-9][a-z0-9_-]{0,63}.
// A loop, not a regexp: compiling that one (the {0,63} unrolled) was a
// third of a millisecond of every relay process's start, the facade's
// included.
func agentNameShape(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidAgentName reports whether name is a well-formed agent name:
// [a-z0-9][a-z0-9_-]{0,63}, and not the reserved model.RelayAgent.
func ValidAgentName(name string) bool { return name != model.RelayAgent && agentNameShape(name) }
