package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// chatTurns plays a model-driven agent against a chat-completions
// endpoint (the relay's scripted model): it offers the model tools, runs
// each tool call the model makes through call, gives it the result, and
// returns the model's final text, or "too many turns" after eight.
func chatTurns(ctx context.Context, endpoint, key string, tools []string, prompt string,
	call func(id, name string, args map[string]any) string) (string, error) {
	var offered []map[string]any
	for _, t := range tools {
		offered = append(offered, map[string]any{"type": "function", "function": map[string]any{"name": t,
			"parameters": map[string]any{"type": "object"}}})
	}
	msgs := []map[string]any{{"role": "user", "content": prompt}}
	for turn := 0; turn < 8; turn++ {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": offered})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || len(out.Choices) == 0 {
			return "", fmt.Errorf("model answer: %v", err)
		}
		m := out.Choices[0].Message
		if len(m.ToolCalls) == 0 {
			return m.Content, nil
		}
		c := m.ToolCalls[0]
		var args map[string]any
		_ = json.Unmarshal([]byte(c.Function.Arguments), &args)
		result := call(c.ID, c.Function.Name, args)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": c.ID, "type": "function", "function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}}}},
			map[string]any{"role": "tool", "tool_call_id": c.ID, "content": result})
	}
	return "too many turns", nil
}
