package daemon

import (
	"context"
	"sync"
)

// Inflight tracks the requests a service is serving, so that its Close lets them finish, and
// be recorded, while new ones are refused. The zero value is ready to use.
type Inflight struct {
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

// Begin registers a request unless Drain has started; a caller that got true calls Done.
func (f *Inflight) Begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.wg.Add(1)
	return true
}

// Done ends a request Begin registered.
func (f *Inflight) Done() { f.wg.Done() }

// Drain refuses new requests and waits for those in flight, or for ctx to end. It reports
// whether every request finished.
func (f *Inflight) Drain(ctx context.Context) bool {
	f.mu.Lock()
	f.closing = true
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
