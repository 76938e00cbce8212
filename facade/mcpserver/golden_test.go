package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files from the code instead of comparing:
// go test -tags relaytest ./facade/mcpserver -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the code")

// The tools the facade offers, as a client reads them from tools/list:
// names, descriptions, input schemas and annotations. A change to any of
// them is a change to what every agent's model reads, so it shows here
// as a diff of testdata/tools_list.golden.json.
func TestToolsListGolden(t *testing.T) {
	svc := mcpNewFake()
	p := mcpMustServePipes(t, svc)
	r := bufio.NewReader(p.fromServer)
	mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"0"}}}`, true)
	mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)
	list := mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, true)
	got, err := json.MarshalIndent(list["result"], "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "tools_list.golden.json"), append(got, '\n'))
}

// checkGolden compares got with the golden file, or rewrites it under
// -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code gives (run with -update to accept, and review the diff):\n%s", path, got)
	}
}
