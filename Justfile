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
    go test -race -count=1 ./...

# Vet and formatting.
lint:
    go vet ./...
    test -z "$(gofmt -l $(git ls-files '*.go'))"

# Benchmarks: each package's go test -bench, printed as-is.
bench:
    go test -run '^$' -bench . -benchmem ./persistence ./gates ./machine ./dispatch ./facade

# Regenerate the golden lifecycle graph and render it to SVG.
dot:
    go test ./machine -run TestGoldenDOT -update
    go run ./cmd/relay fsm dot | dot -Tsvg -o spec/lifecycle.svg
