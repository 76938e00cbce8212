package model_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// TestEncodedLen: EncodedLen is the length of json.Marshal's output, HTML
// escaping and all, for the items listings return.
func TestEncodedLen(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	for _, v := range []any{
		model.Message{ID: "MSG-1", Body: strings.Repeat("<", 1000) + "&>\u2028\x01\"\\é\xff", CreatedAt: at, ReadAt: &at},
		model.Task{ID: "T-1", Prompt: "<p>", Result: strings.Repeat("&", 77), ToolCalls: []model.ToolCall{{ID: "x", Title: "<t>"}}},
		model.Inbox{Messages: []model.Message{{ID: "a"}}, Unread: 12},
		"", nil, 3,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := model.EncodedLen(v); got != len(b) {
			t.Errorf("EncodedLen(%T) = %d, json.Marshal gives %d bytes", v, got, len(b))
		}
	}
	if got := model.EncodedLen(func() {}); got != -1 {
		t.Errorf("EncodedLen of a func = %d, want -1", got)
	}
}

// TestByteBudgetTake: a budget takes items while they fit (with a comma
// between two) and always takes the first, however large.
func TestByteBudgetTake(t *testing.T) {
	t.Parallel()
	p := model.NewByteBudget(model.AnswerEnvelopeBytes + 100)
	for i, c := range []struct {
		size int
		want bool
	}{{60, true}, {39, true}, {1, false}} {
		if got := p.Take(c.size); got != c.want {
			t.Errorf("item %d of %d bytes: Take = %v, want %v", i, c.size, got, c.want)
		}
	}
	big := model.NewByteBudget(0)
	if !big.Take(model.AnswerBytes*2) || big.Take(1) {
		t.Error("a budget takes its first item whatever its size, and nothing after one that filled it")
	}
}
