package mcpserver

import (
	"bufio"
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	"github.com/hai-relay/relay/spec/spectest"
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
	spectest.Golden(t, filepath.Join("testdata", "tools_list.golden.json"), append(got, '\n'), *update)
}
