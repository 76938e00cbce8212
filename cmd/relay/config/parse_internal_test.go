package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestHintsMatchTheFile: every value key of the format (a field of Config
// with a toml tag) has a hint and a check, and every hint names a value
// key, so that a key added to the format cannot go without one; every
// table of the format is in the schema its keys are checked against.
func TestHintsMatchTheFile(t *testing.T) {
	t.Parallel()
	var values []string
	var walk func(k toml.Key, typ reflect.Type)
	walk = func(k toml.Key, typ reflect.Type) {
		if _, ok := schema[pattern(k)]; !ok {
			t.Errorf("table [%s] is not in the schema", pattern(k))
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			fk := append(slices.Clip(k), tag)
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(fk, f.Type)
			case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
				walk(append(fk, "*"), f.Type.Elem())
			default:
				values = append(values, pattern(fk))
			}
		}
	}
	walk(nil, reflect.TypeFor[Config]())
	if len(values) != len(leaves) {
		t.Errorf("the format has %d value keys, hints %d", len(values), len(leaves))
	}
	for _, p := range values {
		if leafHint(p, "") == "" || leaves[p].check == nil {
			t.Errorf("value key %s has no hint or no check", p)
		}
	}
}
