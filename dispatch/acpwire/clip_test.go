package acpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// clipThrough runs one line (without its newline) through a lineClipper in
// fragments of size n.
func clipThrough(line []byte, n int) *lineClipper {
	c := &lineClipper{}
	c.reset()
	for len(line) > 0 {
		k := min(n, len(line))
		c.write(line[:k])
		line = line[k:]
	}
	return c
}

var cutMark = regexp.MustCompile(`…\[(\d+) bytes cut\]$`)

// sameOrCut reports whether got is want, or a prefix of want (at a UTF-8
// boundary) of at least bound bytes of JSON, followed by the cut mark;
// walking decoded JSON values in parallel.
func sameOrCut(t *testing.T, path string, got, want any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			t.Fatalf("%s: %T with %d keys, want an object of %d", path, got, len(g), len(w))
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				// A key may itself have been cut.
				t.Fatalf("%s: key %.40q missing", path, k)
			}
			sameOrCut(t, path+"."+k, gv, v)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Fatalf("%s: %T, want an array of %d", path, got, len(w))
		}
		for i := range w {
			sameOrCut(t, fmt.Sprintf("%s[%d]", path, i), g[i], w[i])
		}
	case string:
		g, ok := got.(string)
		if !ok {
			t.Fatalf("%s: %T, want a string", path, got)
		}
		if g == w {
			return
		}
		m := cutMark.FindStringIndex(g)
		if m == nil {
			t.Fatalf("%s: %.60q… is neither %.60q… nor cut and marked", path, g, w)
		}
		if kept := g[:m[0]]; !strings.HasPrefix(w, kept) || !utf8.ValidString(kept) {
			t.Fatalf("%s: the kept %d bytes are not a prefix of the %d-byte original", path, len(kept), len(w))
		}
	default:
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, want %v", path, got, want)
		}
	}
}

// A line whose strings are within their bounds comes out byte for byte;
// a long one keeps its structure, every value, and each string's first
// bytes up to its bound (its message text's up to the reply's bound),
// marked where it was cut — whatever the fragments it arrives in.
func TestLineClipper(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("é€a\"\\\n\t\u2028x", 20_000) // 280 KB of runes and escapes, 420 KB encoded
	mk := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	update := func(u map[string]any) []byte {
		return mk(map[string]any{"jsonrpc": "2.0", "method": "session/update",
			"params": map[string]any{"sessionId": "s", "update": u}})
	}
	chunk := update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}})
	tool := update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": text[:50_000], "title": text,
		"kind": "edit", "content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": text}}},
		"rawInput": map[string]any{"content": text, "n": 3.5, "ok": true, "none": nil}})
	perm := mk(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": map[string]any{
		"toolCall": map[string]any{"toolCallId": "c", "content": []any{map[string]any{"type": "diff", "path": "/x", "newText": text}}},
		"options":  []any{map[string]any{"kind": "reject_once", "name": "no", "optionId": "reject"}}}})
	// Text written in six-byte escapes is cut at clipTextJSON as written,
	// so its line still fits maxHeldLine.
	controls := update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": strings.Repeat("\x01", 300_000)}})
	small := update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text[:200<<10]}})

	for _, frag := range []int{1 << 20, 64 << 10, 4093, 7} {
		for name, line := range map[string][]byte{"chunk": chunk, "tool": tool, "perm": perm, "small": small, "controls": controls} {
			if frag == 7 && len(line) > 320<<10 {
				continue // byte-sized fragments of the largest lines: slow, and the 4093 ones cover the seams
			}
			c := clipThrough(line, frag)
			if c.over || c.raw != len(line) {
				t.Fatalf("%s/%d: over %v, %d of %d bytes scanned", name, frag, c.over, c.raw, len(line))
			}
			var got, want any
			if err := json.Unmarshal(c.out, &got); err != nil {
				t.Fatalf("%s/%d: the clipped line is not JSON (%v): %.200q", name, frag, err, c.out)
			}
			if err := json.Unmarshal(line, &want); err != nil {
				t.Fatal(err)
			}
			sameOrCut(t, name, got, want)
			switch name {
			case "small":
				if !bytes.Equal(c.out, line) || c.cutStrings != 0 {
					t.Errorf("%d: a 200 KiB message text was cut", frag)
				}
			case "chunk":
				kept := got.(map[string]any)["params"].(map[string]any)["update"].(map[string]any)["content"].(map[string]any)["text"].(string)
				if n := len(kept) - len(cutMark.FindString(kept)); n < clipTextBytes || n > clipTextBytes+4 {
					t.Errorf("%d: %d bytes of the message text kept, want its first %d KiB", frag, n, clipTextBytes>>10)
				}
				if c.method != "session/update" || c.hasID || len(c.out) > 2*clipTextBytes {
					t.Errorf("%d: method %q, id %v, %d bytes", frag, c.method, c.hasID, len(c.out))
				}
			case "controls":
				if len(c.out) > clipTextJSON+1<<10 || c.cutStrings != 1 {
					t.Errorf("%d: %d bytes kept, %d strings cut; want the text cut at %d KiB as written", frag, len(c.out), c.cutStrings, clipTextJSON>>10)
				}
			case "tool":
				if len(c.out) > 4*2*clipOtherBytes+4<<10 || c.cutStrings != 4 {
					t.Errorf("%d: %d bytes kept, %d strings cut; want every long string at %d KiB", frag, len(c.out), c.cutStrings, clipOtherBytes>>10)
				}
			case "perm":
				if c.method != "session/request_permission" || !c.hasID || c.cutStrings != 1 {
					t.Errorf("%d: method %q, id %v, %d strings cut", frag, c.method, c.hasID, c.cutStrings)
				}
			}
		}
	}
}

// FuzzLineClipper: whatever the line and its fragments, the clipper never
// panics, keeps at most maxHeldLine, and turns valid JSON into valid JSON
// whose values are the same or cut and marked.
func FuzzLineClipper(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":{"text":"hi \u00e9 \\"q\\""}}}}`), 3)
	f.Add([]byte(`{"a":["\ud83d\ude00",1,null,{"text":"`+strings.Repeat(`\n`, 3000)+`"}],"id":"x"}`), 1)
	f.Add([]byte(`{"text":"`+strings.Repeat("é", 3000)+`","k":"`+strings.Repeat(`\u0041`, 2000)+`"}`), 5)
	f.Add([]byte(`not json "at \" all`), 2)
	f.Fuzz(func(t *testing.T, line []byte, frag int) {
		frag = 1 + int(uint(frag)%97)
		c := clipThrough(line, frag)
		if len(c.out) > maxHeldLine {
			t.Fatalf("%d bytes kept", len(c.out))
		}
		var want any
		if json.Unmarshal(line, &want) != nil || c.over {
			return
		}
		var got any
		if err := json.Unmarshal(c.out, &got); err != nil {
			t.Fatalf("valid JSON clipped into invalid (%v): %q → %q", err, line, c.out)
		}
		sameOrCut(t, "line", got, want)
	})
}

// What the limiter hands the SDK and holds in flight is bounded in bytes: a
// stream of 1 MiB updates reaches the SDK cut to 256 KiB each,
// and with none processed the limiter stops reading once about limiterHeldBytes
// are in flight; each processed update lets more through.
func TestGateBoundsBytesInFlight(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("x", 1<<20)
	line := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}` + "\n"
	const lines = 24
	var notes []string
	g := NewLimiter(strings.NewReader(strings.Repeat(line, lines)), func(why string, _ []byte) { t.Errorf("garbage: %s", why) })
	g.Note = func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	got := make(chan int, 1)
	var sdk bytes.Buffer
	go func() {
		n, _ := io.Copy(&sdk, g)
		got <- int(n)
	}()
	held := func() (int, int) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.held, len(g.updates)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h, n := held(); n > 0 && h+clipTextBytes+4<<10 > limiterHeldBytes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the limiter never filled its budget")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // it would read on, if it did
	if h, n := held(); h > limiterHeldBytes || n >= lines {
		t.Fatalf("%d bytes in %d updates in flight, none processed; want at most %d bytes", h, n, limiterHeldBytes)
	}
	for range lines {
		g.Processed()
		time.Sleep(time.Millisecond)
	}
	var n int
	select {
	case n = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the limiter did not resume")
	}
	if each := n / lines; n%lines != 0 || each > clipTextBytes+1<<10 {
		t.Fatalf("the SDK got %d bytes for %d lines of 1 MiB, want each cut to about %d KiB", n, lines, clipTextBytes>>10)
	}
	first := sdk.Bytes()[:n/lines]
	var m struct {
		Params struct {
			Update struct{ Content struct{ Text string } }
		}
	}
	if err := json.Unmarshal(first, &m); err != nil || !strings.HasSuffix(m.Params.Update.Content.Text, "bytes cut]") {
		t.Fatalf("a cut update: %v %.100q", err, first)
	}
	g.Close()
	if all := strings.Join(notes, "\n"); len(notes) != limiterClipNotes+1 || !strings.Contains(all, fmt.Sprintf("cut a \"session/update\" line of %d bytes", len(line)-1)) ||
		!strings.Contains(all, fmt.Sprintf("in all, %d long line(s)", lines)) {
		t.Errorf("task log notes:\n%s", all)
	}
}

// The agent's requests in flight are bounded in count (and bytes): the
// limiter reads no further than limiterMaxRequests unanswered ones, and each
// answer the SDK writes (a response echoing the id, in any spelling)
// releases one.
func TestGateBoundsRequestsInFlight(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for i := range 3 * limiterMaxRequests {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":"r-%d","method":"session/request_permission","params":{}}`+"\n", i)
	}
	g := NewLimiter(strings.NewReader(in.String()), nil)
	lines := make(chan string, 3*limiterMaxRequests)
	go func() {
		br := bufio.NewReader(g)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	var seen []string
	collect := func(want int) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for len(seen) < want {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stream ended after %d lines, want %d", len(seen), want)
				}
				seen = append(seen, l)
			case <-timeout:
				t.Fatalf("%d lines through, want %d", len(seen), want)
			}
		}
	}
	collect(limiterMaxRequests)
	select {
	case l := <-lines:
		t.Fatalf("a request beyond %d unanswered ones went through: %s", limiterMaxRequests, l)
	case <-time.After(200 * time.Millisecond):
	}
	// The SDK answers the first two; its encoder spells ids its own way.
	w := g.Writer(io.Discard)
	for _, id := range []string{`"r-0"`, `"r\u002d1"`} {
		if _, err := w.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}` + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	collect(limiterMaxRequests + 2)
	// The relay's own requests and notifications release nothing.
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"r-2","method":"session/prompt","params":{}}` + "\n"))
	select {
	case l := <-lines:
		t.Fatalf("the relay's own request released a slot: %s", l)
	case <-time.After(200 * time.Millisecond):
	}
}

// A notification that is over maxHeldLine even with its strings cut is
// dropped, and said so; a request or a response that is over it is
// protocol garbage; a line over 10 MiB is garbage, as it was.
func TestGateOversizedLines(t *testing.T) {
	t.Parallel()
	many := `"` + strings.Repeat(`a","`, maxHeldLine/4) + `b"`
	for _, c := range []struct {
		name, line, garbage string
		pass                bool
	}{
		{"notification", `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"entries":[` + many + `]}}}`, "", false},
		{"request", `{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"x":[` + many + `]}}`, "request or response of more than 1024 KiB", false},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{"x":[` + many + `]}}`, "request or response of more than 1024 KiB", false},
		{"over 10 MiB", `{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("z", maxLineBytes) + `"}}`, "longer than 10 MiB", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var why string
			var notes []string
			next := `{"jsonrpc":"2.0","id":9,"result":{}}` + "\n"
			g := NewLimiter(strings.NewReader(c.line+"\n"+next), func(w string, _ []byte) { why = w })
			g.Note = func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }
			out, err := io.ReadAll(g)
			if err != nil {
				t.Fatal(err)
			}
			if c.garbage == "" {
				if why != "" || string(out) != next || len(notes) != 1 || !strings.Contains(notes[0], `dropped a "session/update" notification`) {
					t.Fatalf("garbage %q, out %.100q, notes %q; want the line dropped and noted", why, out, notes)
				}
				return
			}
			if !strings.Contains(why, c.garbage) {
				t.Fatalf("garbage %q, want %q", why, c.garbage)
			}
			if !strings.HasSuffix(string(out), next) || len(out) > len(next) {
				t.Fatalf("the SDK got %d bytes of the refused line", len(out)-len(next))
			}
		})
	}
}

// BenchmarkLineClipper: the cost of cutting a 10 MB message chunk (the
// limiter's work per line of a flooding agent), in the 64 KiB fragments the
// limiter reads.
func BenchmarkLineClipper(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("flood \\n ", 10<<20/9) + `"}}}}`)
	b.SetBytes(int64(len(line)))
	c := &lineClipper{}
	for b.Loop() {
		c.reset()
		for p := line; len(p) > 0; {
			k := min(limiterReadBuffer, len(p))
			c.write(p[:k])
			p = p[k:]
		}
	}
}
