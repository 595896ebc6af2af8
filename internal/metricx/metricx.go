// Package metricx owns what the daemons' metrics share: the registry each starts from, the
// per-label-set series cache they count through, and the collector of their readiness.
package metricx

import "sync"

// A Cache maps a label set to its series (a prometheus.Counter, Observer, ...), resolved once:
// a vector's WithLabelValues hashes the labels and allocates their slice on every call. A series
// is resolved, and so appears on /metrics, on its first Get: a daemon Gets the label sets it
// knows in advance at start, and the others appear when first counted. The label sets are the
// vector's own, so a Cache holds no more than the vector does. The zero value is ready to use.
type Cache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// Get returns the series of k, resolving it with resolve the first time.
func (c *Cache[K, V]) Get(k K, resolve func(K) V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = make(map[K]V)
	}
	v = resolve(k)
	c.m[k] = v
	return v
}
