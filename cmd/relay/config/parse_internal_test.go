package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestHintsMatchTheFile: every value key of the file has a hint, and every
// hint names a value key, so that a key added to the file cannot go
// without one.
func TestHintsMatchTheFile(t *testing.T) {
	t.Parallel()
	var leaves []string
	var walk func(k toml.Key, typ reflect.Type)
	walk = func(k toml.Key, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			fk := append(slices.Clip(k), f.Tag.Get("toml"))
			switch {
			case reflect.PointerTo(f.Type).Implements(reflect.TypeFor[toml.Unmarshaler]()):
				leaves = append(leaves, pattern(fk))
			case f.Type.Kind() == reflect.Map:
				walk(append(fk, "*"), f.Type.Elem().Elem())
			default:
				walk(fk, f.Type)
			}
		}
	}
	walk(nil, reflect.TypeFor[file]())
	if len(leaves) != len(hints) {
		t.Errorf("the file has %d value keys, hints %d", len(leaves), len(hints))
	}
	for _, p := range leaves {
		if leafHint(p, "") == "" {
			t.Errorf("value key %s has no hint", p)
		}
	}
}
