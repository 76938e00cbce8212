package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// A client that hangs up right after its requests: a
// one-shot client (`printf … | relay mcp`), or one that crashes, writes its
// requests and closes the facade's stdin at once. The facade finishes every
// request it read, answers each (or, when stdout is gone too, lets each
// complete) and exits 0: an accepted request is never reported as failed,
// and the daemon stores exactly what was answered.

// oneShotCalls is the number of tools/call requests of one one-shot
// client: sends and submits, alternating.
const oneShotCalls = 4

// oneShotLines is what a one-shot client writes: initialize, initialized,
// then n tools/call (ids 2…n+1) tagged with tag, alternating send_message
// and submit_task.
func oneShotLines(tag string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"one-shot","version":"0"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := range n {
		var params map[string]any
		if i%2 == 0 {
			params = map[string]any{"name": "send_message", "arguments": map[string]any{"to": "codex", "body": fmt.Sprintf("%s-%d", tag, i)}}
		} else {
			params = map[string]any{"name": "submit_task", "arguments": map[string]any{"target": "codex", "prompt": fmt.Sprintf("%s-%d", tag, i)}}
		}
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 2, "method": "tools/call", "params": params})
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

// oneShot runs `relay mcp` as a one-shot client: it writes lines and closes
// stdin at once, without waiting for any answer. With closedOut, the read
// end of the facade's stdout is closed before anything is written (the
// client is gone altogether). It returns what the facade wrote on stdout,
// its stderr and its exit error; a facade that does not exit within two
// minutes fails the test.
func oneShot(t *testing.T, home string, lines []byte, closedOut bool) (stdout []byte, stderr string, exit error) {
	t.Helper()
	cmd := exec.Command(relayBin, "mcp", "--as", "claude", "--home", home, "--no-autostart")
	cmd.Env = append(os.Environ(), fastExit...)
	var errBuf syncBuffer
	cmd.Stderr = &errBuf
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	read := make(chan []byte, 1)
	if closedOut {
		outR.Close()
		read <- nil
	} else {
		go func() { b, _ := io.ReadAll(outR); outR.Close(); read <- b }()
	}
	if _, err := in.Write(lines); err != nil {
		t.Errorf("write the requests: %v", err)
	}
	in.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case exit = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the facade did not exit within two minutes of its stdin's end; stderr:\n%s", errBuf.String())
	}
	return <-read, errBuf.String(), exit
}

// oneShotAnswers decodes the facade's answers by JSON-RPC id: for each,
// the tool result's structured content, or the JSON-RPC error, and
// whether the tool call failed.
type oneShotAnswer struct {
	failed bool
	data   map[string]any
	line   string
}

func oneShotAnswers(t *testing.T, out []byte) map[int]oneShotAnswer {
	t.Helper()
	got := map[int]oneShotAnswer{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID     *int            `json:"id"`
			Error  json.RawMessage `json:"error"`
			Result struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("the facade wrote a non-JSON line: %q", clipText(sc.Text(), 200))
			continue
		}
		if m.ID == nil {
			continue // a notification
		}
		if _, dup := got[*m.ID]; dup {
			t.Errorf("two answers to id %d", *m.ID)
		}
		got[*m.ID] = oneShotAnswer{failed: m.Error != nil || m.Result.IsError, data: m.Result.StructuredContent, line: clipText(sc.Text(), 300)}
	}
	return got
}

// storedByClaude returns the bodies of claude's messages and the prompts
// of claude's tasks that start with prefix, by their ids (the operator's
// view of the database, through the socket API).
func storedByClaude(t *testing.T, c *http.Client, prefix string) (msgs, tasks map[string]string) {
	t.Helper()
	msgs, tasks = map[string]string{}, map[string]string{}
	for _, kind := range []string{"messages", "tasks"} {
		before := ""
		for {
			q := url.Values{"limit": {"1000"}}
			if kind == "messages" {
				q.Set("from", "claude")
			} else {
				q.Set("caller", "claude")
			}
			if before != "" {
				q.Set("before", before)
			}
			r := apiDo(t, c, "GET", "/v1/operator/"+kind+"?"+q.Encode(), "", nil)
			if r.status != 200 {
				t.Fatalf("list %s: %d %s", kind, r.status, r.body)
			}
			items, _ := r.data[kind].([]any)
			if len(items) == 0 {
				break
			}
			for _, it := range items {
				m := it.(map[string]any)
				if kind == "messages" {
					before = m["message_id"].(string)
					if b, _ := m["body"].(string); strings.HasPrefix(b, prefix) {
						msgs[before] = b
					}
				} else {
					before = m["task_id"].(string)
					if p, _ := m["prompt"].(string); strings.HasPrefix(p, prefix) {
						tasks[before] = p
					}
				}
			}
		}
	}
	return msgs, tasks
}

// TestReliabilityMCPClientHangsUp: 30 one-shot clients at once, each
// writing initialize, initialized and 4 tools/call (2 send_message, 2
// submit_task) and closing stdin at once. Every request gets a success
// answer, every facade exits 0, and the daemon stores exactly the answered
// messages and tasks, under the ids the answers gave.
func TestReliabilityMCPClientHangsUp(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	const clients = 30

	type result struct {
		out    []byte
		stderr string
		exit   error
	}
	results := make([]result, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			out, stderr, exit := oneShot(t, home, oneShotLines(fmt.Sprintf("hangup-%d", i), oneShotCalls), false)
			results[i] = result{out, stderr, exit}
		})
	}
	wg.Wait()

	answeredMsgs, answeredTasks := map[string]string{}, map[string]string{}
	var failed, missing int
	for i, r := range results {
		if r.exit != nil {
			t.Errorf("client %d: the facade exited with %v; stderr:\n%s", i, r.exit, r.stderr)
		}
		got := oneShotAnswers(t, r.out)
		if a, ok := got[1]; !ok || a.failed {
			t.Errorf("client %d: initialize answered %v (%q)", i, ok, a.line)
		}
		for n := range oneShotCalls {
			tag := fmt.Sprintf("hangup-%d-%d", i, n)
			a, ok := got[n+2]
			switch {
			case !ok:
				missing++
				t.Errorf("client %d: no answer to %s", i, tag)
			case a.failed:
				failed++
				t.Errorf("client %d: %s failed: %s", i, tag, a.line)
			case n%2 == 0:
				answeredMsgs[a.data["message_id"].(string)] = tag
			default:
				answeredTasks[a.data["task_id"].(string)] = tag
			}
		}
	}
	msgs, tasks := storedByClaude(t, c, "hangup-")
	if failed+missing > 0 {
		t.Errorf("%d of %d requests failed and %d got no answer; %d messages and %d tasks are stored", failed, clients*oneShotCalls, missing, len(msgs), len(tasks))
	}
	for _, check := range []struct {
		what             string
		answered, stored map[string]string
	}{{"message", answeredMsgs, msgs}, {"task", answeredTasks, tasks}} {
		for id, tag := range check.answered {
			if check.stored[id] != tag {
				t.Errorf("answered %s %s (%s) is stored as %q", check.what, id, tag, check.stored[id])
			}
		}
		for id, tag := range check.stored {
			if _, ok := check.answered[id]; !ok {
				t.Errorf("%s %s (%s) is stored but was not answered", check.what, id, tag)
			}
		}
	}
	auditVerify(t, home)
}

// TestReliabilityMCPClientGoneAltogether: clients that close the facade's
// stdout as well as its stdin (nothing will read an answer). The facade
// still carries out every request it read, and exits 0.
func TestReliabilityMCPClientGoneAltogether(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	const clients = 10

	exits := make([]error, clients)
	stderrs := make([]string, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			_, stderrs[i], exits[i] = oneShot(t, home, oneShotLines(fmt.Sprintf("gone-%d", i), oneShotCalls), true)
		})
	}
	wg.Wait()
	for i, err := range exits {
		if err != nil {
			t.Errorf("client %d: the facade exited with %v; stderr:\n%s", i, err, stderrs[i])
		}
	}
	msgs, tasks := storedByClaude(t, c, "gone-")
	stored := map[string]bool{}
	for _, b := range msgs {
		stored[b] = true
	}
	for _, p := range tasks {
		stored[p] = true
	}
	for i := range clients {
		for n := range oneShotCalls {
			if tag := fmt.Sprintf("gone-%d-%d", i, n); !stored[tag] {
				t.Errorf("client %d: %s is not stored", i, tag)
			}
		}
	}
	if want := clients * oneShotCalls; len(msgs)+len(tasks) != want {
		t.Errorf("%d messages and %d tasks stored, want %d in all, each once", len(msgs), len(tasks), want)
	}
	auditVerify(t, home)
}
