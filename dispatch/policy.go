package dispatch

import (
	"context"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/model"
)

// What the relay's ACP client advertises at initialize. These three
// constants are the only place the capabilities are decided: the
// initialize request is built from them (clientCapabilities) and so is the
// policy the acpDenial gate checks (derivePolicy).
const (
	advertiseFSRead   = false
	advertiseFSWrite  = false
	advertiseTerminal = false
)

// clientCapabilities is the one ClientCapabilities value every initialize
// request carries.
func clientCapabilities() acp.ClientCapabilities {
	return acp.ClientCapabilities{
		Fs: acp.FileSystemCapabilities{
			ReadTextFile:  advertiseFSRead,
			WriteTextFile: advertiseFSWrite,
		},
		Terminal: advertiseTerminal,
		// Auth.Terminal stays false: the relay never runs a login for an agent.
	}
}

// Outcome names of a denial, as reported in model.Denial.Outcome.
const (
	outcomeSelected  = "selected"
	outcomeCancelled = "cancelled"
)

// decidePermission is the whole permission policy, used by the client's
// RequestPermission handler: select the agent's reject_once option if it
// offers one, otherwise answer cancelled. Never an allow option, never
// reject_always, never "the first option". An option id that is not
// unique among the options makes any selection ambiguous (the agent could
// read the reject_once id as an allow option's), so such a request is
// answered cancelled too.
func decidePermission(options []acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId) {
	if duplicateOptionID(options) {
		return acp.NewRequestPermissionOutcomeCancelled(), ""
	}
	for _, o := range options {
		if o.Kind == acp.PermissionOptionKindRejectOnce {
			return acp.NewRequestPermissionOutcomeSelected(o.OptionId), o.OptionId
		}
	}
	return acp.NewRequestPermissionOutcomeCancelled(), ""
}

// duplicateOptionID reports whether two of the options share an id.
func duplicateOptionID(options []acp.PermissionOption) bool {
	seen := make(map[acp.PermissionOptionId]bool, len(options))
	for _, o := range options {
		if seen[o.OptionId] {
			return true
		}
		seen[o.OptionId] = true
	}
	return false
}

// derivePolicy computes the dispatcher's promise from the values the client
// actually uses, so it cannot drift from them:
//
//   - AdvertisesFS / AdvertisesTerminal come from clientCapabilities(), and
//     are also true if the client's fs or terminal handlers would serve a
//     request instead of refusing it;
//   - DeniesAllPermissions is true only if decidePermission, run over every
//     list of up to three options drawn from the four ACP option kinds and
//     an unknown kind, each with one of three ids (so that ids repeat),
//     never selects anything but a reject_once option whose id no other
//     option has, and answers cancelled whenever an id repeats.
func derivePolicy() model.DispatchPolicy {
	caps := clientCapabilities()
	return model.DispatchPolicy{
		DeniesAllPermissions: deniesEveryPermission(decidePermission),
		AdvertisesFS:         caps.Fs.ReadTextFile || caps.Fs.WriteTextFile || !refusesFS(),
		AdvertisesTerminal:   caps.Terminal || caps.Auth.Terminal || !refusesTerminal(),
	}
}

// deniesEveryPermission checks decide exhaustively over small option lists,
// with ids drawn from a pool small enough that some lists repeat one.
func deniesEveryPermission(decide func([]acp.PermissionOption) (acp.RequestPermissionOutcome, acp.PermissionOptionId)) bool {
	kinds := []acp.PermissionOptionKind{
		acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways,
		acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways,
		"some_future_kind",
	}
	var lists [][]acp.PermissionOption
	var gen func(prefix []acp.PermissionOption, depth int)
	gen = func(prefix []acp.PermissionOption, depth int) {
		lists = append(lists, append([]acp.PermissionOption(nil), prefix...))
		if depth == 3 {
			return
		}
		for _, k := range kinds {
			for _, id := range []acp.PermissionOptionId{"a", "b", "c"} {
				gen(append(prefix, acp.PermissionOption{Kind: k, Name: string(k), OptionId: id}), depth+1)
			}
		}
	}
	gen(nil, 0)
	for _, opts := range lists {
		out, id := decide(opts)
		// Counted here rather than with duplicateOptionID, so that the
		// check does not take the decision's helper on trust.
		count := map[acp.PermissionOptionId]int{}
		dup := false
		for _, o := range opts {
			count[o.OptionId]++
			dup = dup || count[o.OptionId] > 1
		}
		switch {
		case out.Cancelled != nil && out.Selected == nil:
			if id != "" {
				return false
			}
			for _, o := range opts {
				if o.Kind == acp.PermissionOptionKindRejectOnce && !dup {
					return false // a reject_once was offered and not taken
				}
			}
		case out.Selected != nil && out.Cancelled == nil:
			if dup {
				return false // an ambiguous selection
			}
			ok := false
			for _, o := range opts {
				if o.OptionId == out.Selected.OptionId && o.Kind == acp.PermissionOptionKindRejectOnce {
					ok = true
				}
			}
			if !ok || id != out.Selected.OptionId {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// refusesFS reports whether the client's fs handlers answer with an error.
func refusesFS() bool {
	var c client
	ctx := context.Background()
	_, rerr := c.ReadTextFile(ctx, acp.ReadTextFileRequest{Path: "/"})
	_, werr := c.WriteTextFile(ctx, acp.WriteTextFileRequest{Path: "/"})
	return rerr != nil && werr != nil
}

// refusesTerminal reports whether every terminal handler answers with an error.
func refusesTerminal() bool {
	var c client
	ctx := context.Background()
	_, e1 := c.CreateTerminal(ctx, acp.CreateTerminalRequest{Command: "true"})
	_, e2 := c.KillTerminal(ctx, acp.KillTerminalRequest{})
	_, e3 := c.TerminalOutput(ctx, acp.TerminalOutputRequest{})
	_, e4 := c.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{})
	_, e5 := c.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{})
	return e1 != nil && e2 != nil && e3 != nil && e4 != nil && e5 != nil
}
