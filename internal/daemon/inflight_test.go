package daemon

import (
	"context"
	"testing"
	"time"
)

func TestInflight(t *testing.T) {
	var f Inflight
	if !f.Begin() {
		t.Fatal("a fresh Inflight refuses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if f.Drain(ctx) {
		t.Fatal("Drain reported done with a request in flight")
	}
	if f.Begin() {
		t.Fatal("Begin accepted a request after Drain started")
	}
	f.Done()
	if !f.Drain(context.Background()) {
		t.Fatal("Drain did not finish once the request was done")
	}
}
