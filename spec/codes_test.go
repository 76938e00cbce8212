package spec_test

import (
	"bytes"
	"flag"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// update rewrites golden files instead of comparing with them:
// go test ./spec -update
var update = flag.Bool("update", false, "rewrite the golden files (spec/errors.md) from the code")

// contractTaskCodes and contractRequestCodes are the task and request codes
// the relay promises (spec/errors.md is rendered from the catalogue),
// written out here as the independent source the catalogue is checked
// against.
var (
	contractTaskCodes = []model.Code{
		"missing_mission_id", "missing_lease_id", "invalid_mission_id", "invalid_lease_id",
		"delegation_cycle", "delegation_too_deep", "acp_denial_not_enforced", "agent_disabled", "agent_not_configured",
		"agent_not_verified", "authority_not_configured", "authority_unavailable", "authority_timeout",
		"authority_invalid_response", "authority_denied",
		"state_changing_requires_guarded_claude", "dispatch_failed",
		"dispatch_interrupted", "agent_crashed", "agent_refused", "agent_max_tokens",
		"agent_max_turn_requests", "agent_auth_required", "agent_unsafe_mode", "agent_start_timeout", "agent_sandbox_unavailable", "task_timeout",
		"canceled_by_submitter", "canceled_by_operator",
	}
	contractRequestCodes = []model.Code{
		"invalid_args", "unknown_agent", "invalid_recipient",
		"broadcast_not_supported", "payload_too_large", "invalid_cwd", "not_found",
		"task_not_cancelable", "idempotency_conflict", "daemon_unavailable", "daemon_already_running", "outcome_unknown", "storage_full", "recipient_inbox_full", "identity_mismatch", "internal",
	}
	// contractTaskStates is the state each task code leads to: rejected
	// for a gate's policy decision, blocked when a gate fails closed,
	// failed when dispatch or the run fails, canceled when someone cancels
	// (spec/lifecycle.dot has the transitions; docs/agents/running.md describes
	// agent_auth_required).
	contractTaskStates = map[model.Code]model.State{
		"missing_mission_id":                     model.StateRejected,
		"missing_lease_id":                       model.StateRejected,
		"invalid_mission_id":                     model.StateRejected,
		"invalid_lease_id":                       model.StateRejected,
		"delegation_cycle":                       model.StateRejected,
		"delegation_too_deep":                    model.StateRejected,
		"acp_denial_not_enforced":                model.StateBlocked,
		"agent_disabled":                         model.StateBlocked,
		"agent_not_configured":                   model.StateBlocked,
		"agent_not_verified":                     model.StateBlocked,
		"authority_not_configured":               model.StateBlocked,
		"authority_unavailable":                  model.StateBlocked,
		"authority_timeout":                      model.StateBlocked,
		"authority_invalid_response":             model.StateBlocked,
		"authority_denied":                       model.StateRejected,
		"state_changing_requires_guarded_claude": model.StateRejected,
		"dispatch_failed":                        model.StateFailed,
		"dispatch_interrupted":                   model.StateFailed,
		"agent_crashed":                          model.StateFailed,
		"agent_refused":                          model.StateFailed,
		"agent_max_tokens":                       model.StateFailed,
		"agent_max_turn_requests":                model.StateFailed,
		"agent_unsafe_mode":                      model.StateFailed,
		"agent_start_timeout":                    model.StateFailed,
		"agent_sandbox_unavailable":              model.StateFailed,
		"task_timeout":                           model.StateFailed,
		"canceled_by_submitter":                  model.StateCanceled,
		"canceled_by_operator":                   model.StateCanceled,
	}
)

// renderErrorsDoc renders spec/errors.md as the relay publishes it, with
// the socket API's HTTP statuses: spec holds no net/http, so this external
// test is where the catalogue and the status table meet.
func renderErrorsDoc() []byte { return spec.RenderErrorsMarkdown(socketapi.Status, http.StatusText) }

func TestErrorsDoc(t *testing.T) {
	const path = "errors.md"
	got := renderErrorsDoc()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run: go test ./spec -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("spec/errors.md is out of date with spec.Catalogue; run: go test ./spec -update\n%s",
			firstDiff(string(want), string(got)))
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  file: " + x + "\n  code: " + y
		}
	}
	return ""
}

// Every code is listed in errors.md exactly once, as a row of its kind's
// table.
func TestErrorsDocRows(t *testing.T) {
	t.Parallel()
	doc := string(renderErrorsDoc())
	sections := map[spec.CodeKind]string{}
	parts := strings.Split(doc, "\n## ")
	for _, p := range parts[1:] {
		switch {
		case strings.HasPrefix(p, "Task codes"):
			sections[spec.KindTask] = p
		case strings.HasPrefix(p, "Request codes"):
			sections[spec.KindRequest] = p
		case strings.HasPrefix(p, "Engine codes"):
			sections[spec.KindEngine] = p
		case strings.HasPrefix(p, "Request bounds"):
		default:
			t.Errorf("unexpected section %q", strings.SplitN(p, "\n", 2)[0])
		}
	}
	for _, ci := range spec.Catalogue() {
		row := "\n| `" + string(ci.Code) + "` | "
		if n := strings.Count(doc, row); n != 1 {
			t.Errorf("code %s has %d rows in errors.md, want 1", ci.Code, n)
		}
		if !strings.Contains(sections[ci.Kind], row) {
			t.Errorf("code %s is not in the %s section", ci.Code, ci.Kind)
		}
		if ci.Kind == spec.KindTask && !strings.Contains(sections[ci.Kind], row+"`"+string(ci.State)+"` |") {
			t.Errorf("code %s's row does not give its state %s", ci.Code, ci.State)
		}
	}
}

func TestCatalogueMatchesModel(t *testing.T) {
	t.Parallel()
	count := map[model.Code]int{}
	for _, ci := range spec.Catalogue() {
		count[ci.Code]++
	}
	for _, c := range model.AllCodes() {
		if count[c] != 1 {
			t.Errorf("code %s is in the catalogue %d times, want exactly once", c, count[c])
		}
	}
	for c := range count {
		if !slices.Contains(model.AllCodes(), c) {
			t.Errorf("catalogue code %s is not in model.AllCodes()", c)
		}
	}
	if n := len(spec.Catalogue()); n != len(model.AllCodes()) {
		t.Errorf("catalogue has %d entries, model.AllCodes() %d", n, len(model.AllCodes()))
	}

	// The kinds agree with the model's lists.
	kinds := map[spec.CodeKind][]model.Code{
		spec.KindTask:    model.AllTaskCodes(),
		spec.KindRequest: model.AllRequestCodes(),
		spec.KindEngine:  model.AllEngineCodes(),
	}
	for _, ci := range spec.Catalogue() {
		list, ok := kinds[ci.Kind]
		if !ok {
			t.Errorf("code %s has unknown kind %q", ci.Code, ci.Kind)
			continue
		}
		if !slices.Contains(list, ci.Code) {
			t.Errorf("code %s has kind %s, but the model does not list it as one", ci.Code, ci.Kind)
		}
	}
}

func TestCatalogueMatchesContract(t *testing.T) {
	t.Parallel()
	var task, request []model.Code
	for _, ci := range spec.Catalogue() {
		switch ci.Kind {
		case spec.KindTask:
			task = append(task, ci.Code)
		case spec.KindRequest:
			request = append(request, ci.Code)
		}
	}
	sameSet := func(what string, got, want []model.Code) {
		for _, c := range want {
			if !slices.Contains(got, c) {
				t.Errorf("the code catalogue (spec/errors.md) %s code %s is missing from the catalogue", what, c)
			}
		}
		for _, c := range got {
			if !slices.Contains(want, c) {
				t.Errorf("catalogue %s code %s is not in the code catalogue (spec/errors.md)", what, c)
			}
		}
	}
	sameSet("task", task, contractTaskCodes)
	sameSet("request", request, contractRequestCodes)

	for c, want := range contractTaskStates {
		ci, ok := spec.Lookup(c)
		if ok && ci.State != want {
			t.Errorf("code %s leads to %s, the documented lifecycle (spec/lifecycle.dot, spec/errors.md) says %s", c, ci.State, want)
		}
	}
}

func TestCatalogueEntries(t *testing.T) {
	t.Parallel()
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	endStates := []model.State{model.StateFailed, model.StateRejected, model.StateBlocked, model.StateCanceled}
	for _, ci := range spec.Catalogue() {
		if !snake.MatchString(string(ci.Code)) {
			t.Errorf("code %q is not snake_case", ci.Code)
		}
		if ci.Meaning == "" {
			t.Errorf("code %s has no meaning", ci.Code)
		}
		switch ci.Kind {
		case spec.KindTask:
			if !ci.State.Terminal() {
				t.Errorf("task code %s leads to %s, which is not terminal", ci.Code, ci.State)
			}
			if !slices.Contains(endStates, ci.State) {
				t.Errorf("task code %s leads to %s, want one of %v", ci.Code, ci.State, endStates)
			}
			if ci.Hint == "" {
				t.Errorf("task code %s has no hint (a task that ends with it carries one)", ci.Code)
			}
		default:
			if ci.State != "" {
				t.Errorf("%s code %s has a state %s; only task codes lead to one", ci.Kind, ci.Code, ci.State)
			}
			if ci.Hint == "" {
				t.Errorf("code %s has no hint", ci.Code)
			}
		}
	}
	// Every end state but completed has at least one code leading to it.
	for _, s := range endStates {
		if !slices.ContainsFunc(spec.Catalogue(), func(ci spec.CodeInfo) bool { return ci.State == s }) {
			t.Errorf("no task code leads to %s", s)
		}
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, c := range model.AllCodes() {
		ci, ok := spec.Lookup(c)
		if !ok || ci.Code != c {
			t.Errorf("Lookup(%s) = %+v, %v", c, ci, ok)
			continue
		}
		if got, want := spec.Hint(c), spec.FillHint(c, spec.HintFacts{}); got != want || (ci.Hint != "" && got == "") {
			t.Errorf("Hint(%s) = %q, want %q", c, got, want)
		}
	}
	if _, ok := spec.Lookup("no_such_code"); ok {
		t.Error("Lookup(no_such_code) ok = true")
	}
	if got := spec.Hint("no_such_code"); got != "" {
		t.Errorf("Hint(no_such_code) = %q, want none", got)
	}
}
