package acpwire

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestGateFlagsGarbageOnce(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		``,
		`{"jsonrpc":"2.0","method":"x/y","params":{}}`,
		`hello world`,
		`null`,
		`{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{}}`,
	}, "\n") + "\n"
	var whys []string
	g := NewLimiter(strings.NewReader(in), func(why string, _ []byte) { whys = append(whys, why) })
	out, err := io.ReadAll(g)
	if err != nil || string(out) != in {
		t.Fatalf("the limiter altered the stream: %v %q", err, out)
	}
	if len(whys) != 1 || !strings.Contains(whys[0], "not JSON") {
		t.Fatalf("garbage reports = %v", whys)
	}
	g = NewLimiter(strings.NewReader("null\n"), func(why string, _ []byte) { whys = append(whys, why) })
	_, _ = io.ReadAll(g)
	if len(whys) != 2 || !strings.Contains(whys[1], "neither") {
		t.Fatalf("garbage reports = %v", whys)
	}
}

// A line longer than the limiter's read buffer whose strings are within
// their bounds reaches the SDK whole (clip_test.go has the ones cut).
func TestGateLongLinesPassWhole(t *testing.T) {
	t.Parallel()
	long := `{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("a", 200<<10) + `"}}` + "\n"
	in := long + long
	bad := false
	g := NewLimiter(strings.NewReader(in), func(string, []byte) { bad = true })
	g.Processed()
	g.Processed()
	out, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(out, []byte(in)) || bad {
		t.Fatalf("err %v, equal %v, garbage %v", err, bytes.Equal(out, []byte(in)), bad)
	}
}

func TestGateAppliesBackpressure(t *testing.T) {
	t.Parallel()
	line := `{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n"
	in := strings.Repeat(line, limiterHighWater+10)
	g := NewLimiter(strings.NewReader(in), nil)
	read := make(chan int, 1)
	go func() {
		n := 0
		buf := make([]byte, len(line))
		for {
			k, err := io.ReadFull(g, buf)
			n += k
			if err != nil {
				break
			}
			if n == limiterHighWater*len(line) {
				read <- n
			}
		}
		read <- n
	}()
	<-read // limiterHighWater lines went through
	select {
	case n := <-read:
		t.Fatalf("read %d bytes past the high-water mark without progress", n)
	case <-time.After(100 * time.Millisecond):
	}
	for i := 0; i < limiterHighWater+10; i++ {
		g.Processed()
	}
	select {
	case n := <-read:
		if n != len(in) {
			t.Fatalf("read %d of %d", n, len(in))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the limiter did not resume")
	}
}
