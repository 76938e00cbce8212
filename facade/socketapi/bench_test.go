package socketapi

import (
	"context"
	"sync"
	"testing"
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
