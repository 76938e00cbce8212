package model_test

import (
	"testing"

	"github.com/hai-relay/relay/model"
)

// A listing's limit: 0 is the default page, 1..MaxPageSize is itself,
// anything else invalid_args with the code's hint.
func TestPageLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want int }{{0, model.DefaultPageSize}, {1, 1}, {model.MaxPageSize, model.MaxPageSize}} {
		if got, err := model.PageLimit(c.in); err != nil || got != c.want {
			t.Errorf("PageLimit(%d) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, n := range []int{-1, model.MaxPageSize + 1} {
		_, err := model.PageLimit(n)
		if model.ErrorCode(err) != model.CodeInvalidArgs || model.Public(err).Hint != model.InvalidArgsHint {
			t.Errorf("PageLimit(%d): %v (hint %q); want invalid_args with its hint", n, err, model.Public(err).Hint)
		}
	}
	if model.DefaultPageSize != 50 || model.MaxPageSize != 1000 {
		t.Errorf("page sizes %d/%d; the documented contract is 50/1000", model.DefaultPageSize, model.MaxPageSize)
	}
}

// InvalidArgs formats as Errorf does (clipping long values) and carries
// the code's hint.
func TestInvalidArgs(t *testing.T) {
	t.Parallel()
	e := model.InvalidArgs("limit %d is out of range 1..%d", 7, 5)
	if e.Code != model.CodeInvalidArgs || e.Message != "limit 7 is out of range 1..5" || e.Hint != model.InvalidArgsHint || e.Hint == "" {
		t.Errorf("InvalidArgs: %+v", e)
	}
}
