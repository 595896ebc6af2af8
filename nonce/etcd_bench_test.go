package nonce

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// BenchmarkEtcdConsume: Consume against a private single-member etcd on loopback (one fsync'd
// raft commit per transaction, batched by etcd under concurrency). Compare with
// BenchmarkNonceConsumeParallel/consume, the bbolt backend under the same load.
//
//	serial    one caller: the latency of one consume
//	parallel  32 concurrent callers, as an executor under load
//	3-stores  32 concurrent callers spread over three connections (three executors)
func BenchmarkEtcdConsume(b *testing.B) {
	ep := etcdtest.Start(b)
	b.Run("serial", func(b *testing.B) {
		e := newTestEtcd(b, ep, EtcdOptions{})
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t := time.Now()
			if err := e.Consume(ctx, newJTI(), time.Now().Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
	b.Run("parallel", func(b *testing.B) {
		e := newTestEtcd(b, ep, EtcdOptions{})
		runParallelConsume(b, func() *Etcd { return e })
	})
	b.Run("3-stores", func(b *testing.B) {
		stores := []*Etcd{newTestEtcd(b, ep, EtcdOptions{}), newTestEtcd(b, ep, EtcdOptions{}), newTestEtcd(b, ep, EtcdOptions{})}
		var (
			mu   sync.Mutex
			next int
		)
		runParallelConsume(b, func() *Etcd {
			mu.Lock()
			defer mu.Unlock()
			next++
			return stores[next%len(stores)]
		})
	})
}

// runParallelConsume runs Consume from 32 goroutines, each on the store pick gives it.
func runParallelConsume(b *testing.B, pick func() *Etcd) {
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	var (
		mu  sync.Mutex
		all []time.Duration
	)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		e := pick()
		ctx := context.Background()
		var lat []time.Duration
		for pb.Next() {
			t := time.Now()
			if err := e.Consume(ctx, newJTI(), time.Now().Add(time.Minute)); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	b.StopTimer()
	reportLatency(b, all)
}
