package metricx

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestCacheResolvesOncePerKey(t *testing.T) {
	var c Cache[string, *atomic.Int64]
	var resolved atomic.Int64
	get := func(k string) *atomic.Int64 {
		return c.Get(k, func(string) *atomic.Int64 {
			resolved.Add(1)
			return new(atomic.Int64)
		})
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { get("x").Add(1); get("y").Add(1) })
	}
	wg.Wait()
	if n := resolved.Load(); n != 2 {
		t.Errorf("resolved %d times, want 2", n)
	}
	if x, y := get("x").Load(), get("y").Load(); x != 50 || y != 50 {
		t.Errorf("x = %d, y = %d, want 50 each", x, y)
	}
}
