package nonce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/verdict"
)

// TestEtcdThreeMemberCluster runs the nonce store against a real 3-member cluster: executors
// connected to different members see one set of consumed nonces, and with one member killed the
// remaining quorum still consumes each verdict exactly once.
func TestEtcdThreeMemberCluster(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	stores := make([]*Etcd, 3)
	for i, m := range c.Members {
		stores[i] = newTestEtcd(t, m.Endpoint, EtcdOptions{Prefix: "/cluster-test/"})
	}
	exp := time.Now().Add(time.Minute)

	// Each verdict submitted to every member at once: exactly one success per verdict.
	consumeEverywhere := func(t *testing.T, jti string, on []*Etcd) (ok, replayed int) {
		t.Helper()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, s := range on {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Consume(context.Background(), jti, exp)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, verdict.ErrReplayed):
					replayed++
				default:
					t.Errorf("consume %s: %v", jti, err)
				}
			}()
		}
		wg.Wait()
		return ok, replayed
	}
	for i := range 20 {
		jti := fmt.Sprintf("cluster-verdict-%02d-AAAAAAAAAAAA", i)
		if ok, rep := consumeEverywhere(t, jti, stores); ok != 1 || rep != 2 {
			t.Fatalf("%s: %d successes, %d replays across three members", jti, ok, rep)
		}
	}

	// One member down: the other two still form a quorum and still refuse replays. If the
	// killed member led the cluster, the others elect a new leader first; until then writes
	// fail (closed) as unavailable.
	c.Members[0].Kill()
	live := stores[1:]
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		err := live[0].Consume(context.Background(), fmt.Sprintf("quorum-probe-%03d-AAAAAAAAAA", i), exp)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("the remaining quorum does not answer: %v", err)
		}
	}
	for i := range 20 {
		jti := fmt.Sprintf("after-kill-%02d-AAAAAAAAAAAAAAA", i)
		if ok, rep := consumeEverywhere(t, jti, live); ok != 1 || rep != 1 {
			t.Fatalf("%s with a member down: %d successes, %d replays", jti, ok, rep)
		}
	}
	if err := stores[1].Consume(context.Background(), "cluster-verdict-00-AAAAAAAAAAAA", exp); !errors.Is(err, verdict.ErrReplayed) {
		t.Fatalf("a verdict consumed before the member died: %v, want replayed", err)
	}
}
