package socketapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/hai-relay/relay/model"
)

// BenchmarkAPIGetTask is one agent call's round trip through the client,
// the socket and the server, against the fake service, on a kept-alive
// connection.
func BenchmarkAPIGetTask(b *testing.B) {
	s := apiServe(b, &apiFakeService{}, ServerOptions{})
	c := apiNewClient(b, s.sock, ClientOptions{Agent: "claude"})
	ctx := context.Background()
	if _, err := c.GetTask(ctx, "", "T-1"); err != nil { // dial + version check
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.GetTask(ctx, "", "T-1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAPIGetTask8Clients is throughput with 8 concurrent clients, each
// with its own connection; ns/op is wall time per call across all 8.
func BenchmarkAPIGetTask8Clients(b *testing.B) {
	const clients = 8
	s := apiServe(b, &apiFakeService{}, ServerOptions{})
	ctx := context.Background()
	cs := make([]*Client, clients)
	for i := range cs {
		cs[i] = apiNewClient(b, s.sock, ClientOptions{Agent: "claude"})
		if _, err := cs[i].GetTask(ctx, "", "T-1"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range cs {
		n := b.N / clients
		if i < b.N%clients {
			n++
		}
		wg.Go(func() {
			for range n {
				if _, err := c.GetTask(ctx, "", "T-1"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkAPIGetTaskHTTPTransport is BenchmarkAPIGetTask's call made with
// net/http's Transport over the same unix dialer (the client's dial, with
// its SO_PEERCRED check) instead of the client's own HTTP/1.1 round trip:
// the measured alternative (BENCHMARKS.md, "The facade's socket client
// makes its own HTTP/1.1 round trips").
func BenchmarkAPIGetTaskHTTPTransport(b *testing.B) {
	s := apiServe(b, &apiFakeService{}, ServerOptions{})
	c := apiNewClient(b, s.sock, ClientOptions{Agent: "claude"})
	tr := &http.Transport{DialContext: c.dial, MaxIdleConnsPerHost: clientMaxIdle, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	ctx := context.Background()
	get := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://relay/v1/tasks/T-1", nil)
		if err != nil {
			return err
		}
		req.Header.Set(AgentHeader, "claude")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, clientMaxResponse))
		if err != nil {
			return err
		}
		var t model.Task
		return json.Unmarshal(data, &t)
	}
	if err := get(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := get(); err != nil {
			b.Fatal(err)
		}
	}
}
