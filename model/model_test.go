package model_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
)

// declaredConstants parses the model package's own source and returns, for
// each named type, the values of the constants declared with that type, in
// source order. It understands `X T = "v"`, `X = T("v")` and the implicit
// repetition of a const block.
func declaredConstants(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			var prevType ast.Expr
			var prevValues []ast.Expr
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				typ, values := vs.Type, vs.Values
				if typ == nil && len(values) == 0 {
					typ, values = prevType, prevValues
				} else {
					prevType, prevValues = typ, values
				}
				for i, id := range vs.Names {
					var v ast.Expr
					if i < len(values) {
						v = values[i]
					}
					tname := ""
					if ident, ok := typ.(*ast.Ident); ok {
						tname = ident.Name
					}
					// X = T("v")
					if call, ok := v.(*ast.CallExpr); ok && typ == nil {
						if fn, ok := call.Fun.(*ast.Ident); ok && len(call.Args) == 1 {
							tname, v = fn.Name, call.Args[0]
						}
					}
					if tname == "" {
						continue // untyped, such as RelayAgent
					}
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: constant %s of type %s is not a string literal; this test cannot read it",
							fset.Position(id.Pos()), id.Name, tname)
						continue
					}
					val, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[tname] = append(out[tname], val)
				}
			}
		}
	}
	return out
}

func strs[T ~string](list []T) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = string(v)
	}
	return out
}

// TestAllListsComplete keeps every All…() list equal to the constants the
// package declares: adding a constant without listing it fails here.
func TestAllListsComplete(t *testing.T) {
	t.Parallel()
	lists := map[string][]string{
		"State":           strs(model.AllStates()),
		"Trigger":         strs(model.AllTriggers()),
		"Mode":            strs(model.AllModes()),
		"Assurance":       strs(model.AllAssurances()),
		"MessageState":    strs(model.AllMessageStates()),
		"Gate":            strs(model.AllGates()),
		"Code":            strs(model.AllCodes()),
		"HardeningStatus": strs(model.AllHardeningStatuses()),
		"Stop":            strs(model.AllStops()),
		"MCPTaskEvent":    strs(model.AllMCPTaskEvents()),
	}
	declared := declaredConstants(t)
	for typ := range declared {
		if _, ok := lists[typ]; !ok {
			t.Errorf("type %s has constants but no All…() list checked here; add one and list it in this test", typ)
		}
	}
	for typ, list := range lists {
		consts := declared[typ]
		if len(consts) == 0 {
			t.Errorf("found no constants of type %s in the source", typ)
		}
		for i, v := range list {
			if slices.Index(list, v) != i {
				t.Errorf("All list of %s has %q twice", typ, v)
			}
			if !slices.Contains(consts, v) {
				t.Errorf("All list of %s has %q, which no constant declares", typ, v)
			}
		}
		for i, v := range consts {
			if slices.Index(consts, v) != i {
				t.Errorf("two constants of type %s have the value %q", typ, v)
			}
			if !slices.Contains(list, v) {
				t.Errorf("constant %s(%q) is missing from its All list", typ, v)
			}
		}
	}
}

func TestCodeListsPartition(t *testing.T) {
	t.Parallel()
	parts := [][]model.Code{model.AllTaskCodes(), model.AllRequestCodes(), model.AllEngineCodes()}
	var joined []model.Code
	for _, p := range parts {
		joined = append(joined, p...)
	}
	if !slices.Equal(joined, model.AllCodes()) {
		t.Errorf("AllCodes() is not AllTaskCodes + AllRequestCodes + AllEngineCodes")
	}
	for i, c := range joined {
		if slices.Index(joined, c) != i {
			t.Errorf("code %s is in more than one list", c)
		}
	}
	// AllCodes must not alias the lists it joins.
	all := model.AllCodes()
	all[0] = "changed"
	if model.AllTaskCodes()[0] == "changed" || model.AllCodes()[0] == "changed" {
		t.Error("AllCodes shares its backing array")
	}
}

func TestSnakeCaseWireValues(t *testing.T) {
	t.Parallel()
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var all []string
	all = append(all, strs(model.AllStates())...)
	all = append(all, strs(model.AllTriggers())...)
	all = append(all, strs(model.AllModes())...)
	all = append(all, strs(model.AllAssurances())...)
	all = append(all, strs(model.AllMessageStates())...)
	all = append(all, strs(model.AllCodes())...)
	all = append(all, strs(model.AllHardeningStatuses())...)
	all = append(all, strs(model.AllStops())...)
	for _, v := range all {
		if !snake.MatchString(v) {
			t.Errorf("wire value %q is not snake_case", v)
		}
	}
	// Gates are named after their guard functions (camelCase) on purpose.
	for _, g := range model.AllGates() {
		if !regexp.MustCompile(`^[a-z][A-Za-z]*$`).MatchString(string(g)) {
			t.Errorf("gate %q is not a Go function name", g)
		}
	}
}

func TestStateTerminal(t *testing.T) {
	t.Parallel()
	terminal := []model.State{"completed", "failed", "canceled", "rejected", "blocked"}
	for _, s := range model.AllStates() {
		if got, want := s.Terminal(), slices.Contains(terminal, s); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
		if !s.Valid() {
			t.Errorf("%s.Valid() = false", s)
		}
	}
	for _, s := range terminal {
		if !slices.Contains(model.AllStates(), s) {
			t.Errorf("terminal state %s is not in AllStates", s)
		}
	}
	for _, s := range []model.State{"", "Completed", "done", "submitted "} {
		if s.Terminal() || s.Valid() {
			t.Errorf("State(%q): Terminal() = %v, Valid() = %v, want false, false", s, s.Terminal(), s.Valid())
		}
	}
}

func TestModeValid(t *testing.T) {
	t.Parallel()
	for _, m := range model.AllModes() {
		if !m.Valid() {
			t.Errorf("%s.Valid() = false", m)
		}
	}
	for _, m := range []model.Mode{"", "READ_ONLY", "read-only", "state_changing "} {
		if m.Valid() {
			t.Errorf("Mode(%q).Valid() = true", m)
		}
	}
}

func TestCoreAgents(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	agents := model.CoreAgents()
	want := []string{"claude", "codex", "cursor", "gemini", "opencode", "hermes"}
	if !slices.Equal(slices.Sorted(slices.Values(agents)), slices.Sorted(slices.Values(want))) {
		t.Errorf("CoreAgents() = %v, want the README's agent list's %v", agents, want)
	}
	for i, a := range agents {
		if slices.Index(agents, a) != i {
			t.Errorf("core agent %s listed twice", a)
		}
		if !name.MatchString(a) || a == model.RelayAgent {
			t.Errorf("core agent name %q is not a valid agent name", a)
		}
	}
}

func TestErrorCode(t *testing.T) {
	t.Parallel()
	e := model.Errorf(model.CodeNotFound, "task %s", "T-1")
	tests := []struct {
		name string
		err  error
		want model.Code
	}{
		{"nil", nil, ""},
		{"plain", errors.New("boom"), model.CodeInternal},
		{"coded", e, model.CodeNotFound},
		{"wrapped", fmt.Errorf("get: %w", e), model.CodeNotFound},
		{"joined", errors.Join(errors.New("other"), e), model.CodeNotFound},
		{"outermost wins", &model.Error{Code: model.CodeStaleState, Err: e}, model.CodeStaleState},
	}
	for _, tt := range tests {
		if got := model.ErrorCode(tt.err); got != tt.want {
			t.Errorf("%s: ErrorCode = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A nil *Error returned as an error is a non-nil error (the classic Go
// trap). ErrorCode and Public must not panic on it.
func TestErrorCodeTypedNil(t *testing.T) {
	t.Parallel()
	var nilErr *model.Error
	var err error = nilErr
	if got := model.ErrorCode(err); got != model.CodeInternal {
		t.Errorf("ErrorCode(typed nil) = %q, want internal", got)
	}
	if p := model.Public(err); p.Code != model.CodeInternal {
		t.Errorf("Public(typed nil) = %+v, want internal", p)
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	inner := errors.New("disk on fire")
	e := &model.Error{Code: model.CodeInternal, Message: "cannot write", Err: inner}
	if got := e.Error(); got != "internal: cannot write: disk on fire" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(e, inner) {
		t.Error("errors.Is does not see the wrapped error")
	}
	e2 := model.Errorf(model.CodeInvalidArgs, "bad %s", "target").WithHint("pass a target")
	if e2.Error() != "invalid_args: bad target" || e2.Hint != "pass a target" || e2.Err != nil {
		t.Errorf("Errorf/WithHint = %+v", e2)
	}
	stale := &model.Error{Code: model.CodeStaleState, Message: "lost", Err: model.ErrStaleState}
	if !errors.Is(fmt.Errorf("transition: %w", stale), model.ErrStaleState) {
		t.Error("a stale-state error does not match ErrStaleState")
	}

	// The wire form is exactly {code, message, hint}; Err is never encoded.
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"code":"internal","message":"cannot write","hint":""}` {
		t.Errorf("JSON = %s", b)
	}
}

func TestPublic(t *testing.T) {
	t.Parallel()
	secret := errors.New("open /home/u/secret.db: permission denied")

	coded := &model.Error{Code: model.CodeNotFound, Message: "no task T-1", Hint: "list_tasks", Err: secret}
	p := model.Public(fmt.Errorf("handler: %w", coded))
	if *p != (model.Error{Code: model.CodeNotFound, Message: "no task T-1", Hint: "list_tasks"}) {
		t.Errorf("Public(coded) = %+v", p)
	}
	if p == coded {
		t.Error("Public returned the original error, internal details included")
	}

	p = model.Public(secret)
	if p.Code != model.CodeInternal || p.Err != nil || p.Hint == "" {
		t.Errorf("Public(plain) = %+v", p)
	}
	for _, s := range []string{p.Message, p.Hint, p.Error()} {
		if strings.Contains(s, "secret") {
			t.Errorf("Public leaks the internal error: %q", s)
		}
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), "secret") {
		t.Errorf("Public's JSON leaks the internal error: %s", b)
	}
}

// An error never quotes a caller's megabytes back: Clip cuts on a rune
// boundary and says how much it cut; Errorf clips every long string
// argument (of any string type); Public bounds message and hint.
func TestErrorsClipEchoedValues(t *testing.T) {
	t.Parallel()
	if got := model.Clip("short", 10); got != "short" {
		t.Errorf("Clip(short) = %q", got)
	}
	big := strings.Repeat("é", 1<<20) // 2 MiB, two bytes a rune
	got := model.Echo(big)
	if !utf8.ValidString(got) || len(got) > model.EchoBytes+32 || !strings.HasSuffix(got, "bytes cut]") {
		t.Errorf("Echo(2 MiB) = %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[max(0, len(got)-40):])
	}
	if want := fmt.Sprintf("…[%d bytes cut]", 2<<20-model.EchoBytes); !strings.HasSuffix(got, want) {
		t.Errorf("Echo does not say how much it cut: %q, want suffix %q", got[len(got)-40:], want)
	}
	e := model.Errorf(model.CodeNotFound, "no task %q in %s", big, model.State(big))
	if len(e.Message) > 2*model.ErrorArgBytes+100 || !utf8.ValidString(e.Message) {
		t.Errorf("Errorf message is %d bytes", len(e.Message))
	}
	p := model.Public(&model.Error{Code: model.CodeInvalidArgs, Message: big, Hint: big})
	if len(p.Message) > model.MaxErrorText+32 || len(p.Hint) > model.MaxErrorText+32 || !utf8.ValidString(p.Message) {
		t.Errorf("Public: message %d bytes, hint %d bytes", len(p.Message), len(p.Hint))
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		720 * time.Hour: "720h", 30 * time.Minute: "30m", 90 * time.Second: "1m30s",
		10 * time.Second: "10s", 90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s",
	} {
		if got := model.ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
