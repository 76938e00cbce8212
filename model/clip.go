package model

import (
	"reflect"
	"strconv"
	"unicode/utf8"
)

// Bounds on what an error says.
const (
	// EchoBytes bounds each value from a request that an error message
	// quotes back (an id, a path, a mode): longer ones are clipped.
	EchoBytes = 200
	// ErrorArgBytes bounds every string argument of Errorf, the net under
	// the call sites that forget Echo (a composed sentence is never this
	// long; a value is).
	ErrorArgBytes = 512
	// MaxErrorText bounds an error's message and its hint as answered to a
	// caller and written to the log.
	MaxErrorText = 2048
)

// Clip returns s if it is at most max bytes, else its first max bytes or
// fewer — never splitting a UTF-8 sequence — followed by a mark saying how
// many bytes were cut, as in "abc…[4194101 bytes cut]".
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…[" + strconv.Itoa(len(s)-i) + " bytes cut]"
}

// Echo clips a request value for quoting in an error message.
func Echo(s string) string { return Clip(s, EchoBytes) }

// echoArgs clips every string argument of an error's format (of any
// string type: an id, a State, a Mode) to ErrorArgBytes, so no message
// quotes a caller's megabytes back whatever the call site forgot.
func echoArgs(args []any) []any {
	var out []any // a copy, made only when something is clipped
	for i, a := range args {
		v := reflect.ValueOf(a)
		if !v.IsValid() || v.Kind() != reflect.String || v.Len() <= ErrorArgBytes {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = Clip(v.String(), ErrorArgBytes)
	}
	if out == nil {
		return args
	}
	return out
}
