# HAI-Relay developer recipes. The README's two commands work without just.

# List the recipes.
default:
    @just --list

# Build the relay binary into ./bin/relay.
build:
    go build -o bin/relay ./cmd/relay

# Run the daemon on the default home (or RELAY_HOME).
run *ARGS:
    go run ./cmd/relay daemon {{ARGS}}

# The README's test command: installs test needs, then go test -race ./...
test *ARGS:
    ./scripts/test {{ARGS}}

# Every test with the race detector (the same as test, without installs).
race:
    go test -race -count=1 -tags relaytest ./...

# Vet, formatting, staticcheck and deadcode (the last two are also in ./scripts/test).
lint:
    go vet ./...
    go vet -tags relaytest ./...
    test -z "$(gofmt -l $(git ls-files '*.go'))"
    go tool staticcheck ./...
    go tool staticcheck -tags relaytest ./...
    ./scripts/deadcode

# The benchmark suite (BENCHMARKS.md): each row a ratio against a floor
# measured in the same run. Pass flags through, e.g. just bench --messages 10000 --tasks 1000 --json
bench *ARGS:
    go run ./cmd/relay-bench {{ARGS}}

# Each package's go test benchmarks, printed as-is.
bench-go:
    go test -run '^$' -bench . -benchmem ./persistence ./gates ./machine ./dispatch ./facade/...

# Regenerate the golden lifecycle graph and render it to SVG.
dot:
    go test ./machine -run TestGoldenDOT -update
    go run ./cmd/relay fsm dot | dot -Tsvg -o spec/lifecycle.svg

# The fuzz targets: the strict JSON check (model/strictjson), the socket API's request
# decoders (facade/socketapi) and the MCP argument decoding
# (facade/mcpserver), the authority response parser (gates), the config
# parser (cmd/relay/config), the audit canonical encoding (persistence). A
# plain `go test` runs only their seeds, as a regression check; a failing
# input lands in the package's testdata/fuzz/, to be committed with the fix.

# Fuzz every parser for TIME each (default 60s), one after the other.
fuzz TIME="60s":
    #!/usr/bin/env bash
    set -euo pipefail
    run() { echo "== $1 $2 ({{TIME}})"; go test -run '^$' -fuzz "^$2\$" -fuzztime {{TIME}} "$1"; }
    for t in FuzzDecodeSendRequest FuzzDecodeSubmitRequest FuzzDecodeAckRequest FuzzDecodeConn FuzzDecodeEmpty; do
        run ./facade/socketapi "$t"
    done
    run ./facade/mcpserver FuzzMCPArgs
    run ./model/strictjson FuzzCheckJSON
    run ./gates FuzzParseResponse
    run ./cmd/relay/config FuzzParseConfig
    run ./persistence FuzzCanonicalAuditRoundTrip
