package verdictd

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/verdictgate/verdict/gates"
)

// TestConvLocksSerializeOneConversation: counters read and written back under the lock never
// lose an increment.
func TestConvLocksSerializeOneConversation(t *testing.T) {
	var locks convLocks
	c := gates.Conversation{Principal: "p", ID: "c"}
	n := 0
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Go(func() {
			unlock, err := locks.lock(context.Background(), c)
			if err != nil {
				t.Error(err)
				return
			}
			v := n
			n = v + 1
			unlock()
		})
	}
	wg.Wait()
	if n != 64 || len(locks.m) != 0 {
		t.Fatalf("n=%d, %d locks left", n, len(locks.m))
	}
}

// TestConvLocksGiveUpAtTheDeadline: a run waiting behind another of its conversation stops
// waiting when its context ends, and leaves the lock as it found it.
func TestConvLocksGiveUpAtTheDeadline(t *testing.T) {
	var locks convLocks
	c := gates.Conversation{Principal: "p", ID: "c"}
	unlock, err := locks.lock(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	errLate := errors.New("deadline")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errLate)
	if _, err := locks.lock(ctx, c); !errors.Is(err, errLate) {
		t.Fatalf("waited past the deadline: %v", err)
	}
	unlock()
	if len(locks.m) != 0 {
		t.Fatalf("%d locks left", len(locks.m))
	}
	unlock, err = locks.lock(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}
