package socketapi

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"

	"github.com/hai-relay/relay/model"
)

// TestStrictJSONLikeTheMCPServer: the socket API and the MCP server read
// what they are sent with the one strict decoder (strictjson.Decode), so a
// submit whose keys could be read two ways (a key in another case, a key
// twice) is refused by both with the same code, invalid_args, and neither
// calls its service: {"TARGET":"claude","target":"codex"} is not a task
// for codex, nor {"target":"a","target":"b"} one for b.
func TestStrictJSONLikeTheMCPServer(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	raw := apiRawClient(t, apiServe(t, f, ServerOptions{}).sock)
	fromFacade, toFacade := serveMCP(t, f)
	answers := bufio.NewReader(fromFacade)
	for _, doc := range []string{
		`{"TARGET":"claude","target":"codex","prompt":"p"}`,
		`{"target":"codex","Target":"claude","prompt":"p"}`,
		`{"target":"a","target":"b","prompt":"p"}`,
		`{"target":"codex","prompt":"p","prompt":"q"}`,
	} {
		status, body := apiDo(t, raw, "POST", "/v1/tasks", map[string]string{AgentHeader: "claude"}, doc)
		if status != 400 {
			t.Errorf("socket API, %s: status %d, want 400 (%s)", doc, status, body)
		}
		apiCheckErrorBody(t, "socket API, "+doc, body, model.CodeInvalidArgs)

		frame := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit_task","arguments":` + doc + `}}`
		if _, err := io.WriteString(toFacade, frame+"\n"); err != nil {
			t.Fatal(err)
		}
		answer, err := answers.ReadBytes('\n')
		if err != nil {
			t.Fatalf("MCP, %s: no answer: %v", doc, err)
		}
		var res struct {
			Result struct {
				IsError           bool              `json:"isError"`
				StructuredContent map[string]string `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(answer, &res); err != nil {
			t.Fatalf("MCP, %s: answer %s: %v", doc, answer, err)
		}
		if !res.Result.IsError || res.Result.StructuredContent["code"] != string(model.CodeInvalidArgs) {
			t.Errorf("MCP, %s: answer %s, want a tool error with code invalid_args", doc, answer)
		}
	}
	for _, c := range f.Calls() {
		if c.Method != "Connected" {
			t.Errorf("a service call for a refused request: %+v", c)
		}
	}
}
