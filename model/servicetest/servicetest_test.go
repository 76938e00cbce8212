package servicetest

import (
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/hai-relay/relay/model"
)

// methodsOf lists the methods of the interface type of ptr (a nil pointer
// to it), sorted.
func methodsOf(ptr any) []string {
	it := reflect.TypeOf(ptr).Elem()
	out := make([]string, it.NumMethod())
	for i := range it.NumMethod() {
		out[i] = it.Method(i).Name
	}
	sort.Strings(out)
	return out
}

// uncovered returns the methods no case covers, and the covered names that
// are no method.
func uncovered(methods []string, cs []suiteCase) (missing, unknown []string) {
	covered := map[string]bool{}
	for _, c := range cs {
		for _, m := range c.covers {
			covered[m] = true
			if !slices.Contains(methods, m) && !slices.Contains(unknown, m) {
				unknown = append(unknown, m)
			}
		}
	}
	for _, m := range methods {
		if !covered[m] {
			missing = append(missing, m)
		}
	}
	return missing, unknown
}

// Every method of model.Service is covered by a test of the suite, so
// that both transports are held to it; a method added to the port without
// a test fails here.
func TestSuiteCoversEveryMethod(t *testing.T) {
	t.Parallel()
	missing, unknown := uncovered(methodsOf((*model.Service)(nil)), cases)
	if len(missing) > 0 {
		t.Errorf("no test of the suite covers model.Service's %v: add one to cases", missing)
	}
	if len(unknown) > 0 {
		t.Errorf("cases cover %v, which model.Service does not have", unknown)
	}
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.name] || len(c.covers) == 0 || c.run == nil {
			t.Errorf("case %q is repeated, covers nothing or runs nothing", c.name)
		}
		names[c.name] = true
	}
}

// The check catches a method no case covers and a name that is no method.
func TestSuiteCoverageCheckCatchesAGap(t *testing.T) {
	t.Parallel()
	methods := methodsOf((*model.Service)(nil))
	var without []suiteCase
	for _, c := range cases {
		c.covers = slices.DeleteFunc(slices.Clone(c.covers), func(m string) bool { return m == "WatchEvents" })
		without = append(without, c)
	}
	without = append(without, suiteCase{name: "Typo", covers: []string{"WatchEvent"}})
	missing, unknown := uncovered(methods, without)
	if !slices.Equal(missing, []string{"WatchEvents"}) || !slices.Equal(unknown, []string{"WatchEvent"}) {
		t.Errorf("with WatchEvents uncovered and a typo: missing %v, unknown %v", missing, unknown)
	}
}
