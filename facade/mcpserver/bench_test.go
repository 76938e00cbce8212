package mcpserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"testing"
)

// BenchmarkFacadeSend is one send_message tools/call through the facade's
// whole stdio path (read, the task layer, mcp-go, the strict checks, the
// tool's argument parsing, the answer's encoding) against an in-memory
// service: the facade's own CPU per durable send, without the socket and
// the daemon. go test -run '^$' -bench FacadeSend -benchmem ./facade/mcpserver
func BenchmarkFacadeSend(b *testing.B) {
	svc := mcpNewFake()
	p := mcpMustServePipes(b, svc)
	r := bufio.NewReader(p.fromServer)
	write := func(s string) {
		if _, err := io.WriteString(p.toServer, s+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`)
	if _, err := r.ReadBytes('\n'); err != nil {
		b.Fatal(err)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"codex","body":"a short passive message of about sixty-four bytes, give or take."}}}`, i+1))
		line, err := r.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 && !bytes.Contains(line, []byte(`"MSG-1"`)) {
			b.Fatalf("answer: %s", line)
		}
	}
}
