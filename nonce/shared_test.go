package nonce

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Only a store every executor consumes in is shared; a local store, and any store this
// package does not know, guards its own executor alone.
func TestShared(t *testing.T) {
	_, b := newTestBolt(t, filepath.Join(t.TempDir(), "executor.db"), newClock(t0))
	// NewEtcd connects lazily, so no cluster is needed to ask it.
	e, err := NewEtcd(context.Background(), EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var unknown Store = struct{ Store }{e} // wraps a shared store but does not say it is one
	for name, tc := range map[string]struct {
		s    Store
		want bool
	}{"bbolt": {b, false}, "etcd": {e, true}, "unknown": {unknown, false}, "nil": {nil, false}} {
		if got := Shared(tc.s); got != tc.want {
			t.Errorf("%s: Shared = %v, want %v", name, got, tc.want)
		}
	}
}
