package convstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/store"
)

// TestBoltConversationBoundProperty: whatever principals and conversation ids a caller sends
// (names that are prefixes of one another, quotes, NULs), in whatever order, with time passing
// and collections between, the bbolt state agrees with a model: a conversation is live until
// the TTL after its last change, Admit and the commit refuse exactly the new conversations of a
// principal at its bound, no principal ever holds more, and an expired conversation reads as
// empty.
func TestBoltConversationBoundProperty(t *testing.T) {
	const ttl, bound = time.Hour, 3
	ctx := context.Background()
	principals := []string{"u", "u_", `u","x`, "u\x00", "v"}
	ids := []string{"", "c", "c\x00", `c"]`, "d", "e", "f"}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "convbound")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		db, err := store.Open(filepath.Join(dir, "state.db"), store.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		defer db.Close(ctx)
		clock := newTestClock()
		st, err := NewBolt(ctx, db, BoltOptions{ConversationTTL: ttl, MaxConversations: bound, GCBatch: 2, Now: clock.Now})
		if err != nil {
			rt.Fatal(err)
		}
		changed := map[gates.Conversation]time.Time{} // the model: last change of every conversation
		counts := map[gates.Conversation]int{}
		live := func(c gates.Conversation) bool {
			at, ok := changed[c]
			return ok && clock.Now().Sub(at) < ttl
		}
		liveOf := func(p string) int {
			n := 0
			for c := range changed {
				if c.Principal == p && live(c) {
					n++
				}
			}
			return n
		}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1: // a preflight that asks
				c := gates.Conversation{Principal: rapid.SampledFrom(principals).Draw(rt, "principal"),
					ID: rapid.SampledFrom(ids).Draw(rt, "id")}
				refuse := !live(c) && liveOf(c.Principal) >= bound
				err := st.Admit(ctx, c)
				if refuse != errors.Is(err, ErrConversationLimit) || (err != nil && !refuse) {
					rt.Fatalf("admit %q: %v, model refuses: %v", c, err, refuse)
				}
				// The commit checks on its own: it is run even when Admit refused.
				r := st.Begin()
				n, err := r.Gate1Counts(ctx, c)
				if err != nil {
					rt.Fatal(err)
				}
				if !live(c) {
					counts[c] = 0
				}
				if n.Intent != counts[c] {
					rt.Fatalf("%q reads %d intent asks, model %d", c, n.Intent, counts[c])
				}
				r.SetGate1Counts(ctx, c, gates.Gate1Counts{Intent: n.Intent + 1})
				err = commit(r, &api.Record{Outcome: api.OutcomeAskUser})
				if refuse != errors.Is(err, ErrConversationLimit) || (err != nil && !refuse) {
					rt.Fatalf("commit %q: %v, model refuses: %v", c, err, refuse)
				}
				if !refuse {
					changed[c], counts[c] = clock.Now(), n.Intent+1
				}
			case 2:
				// Change times are kept in whole milliseconds, as the clock moves here.
				clock.Add(time.Duration(rapid.Int64Range(0, ttl.Milliseconds()).Draw(rt, "wait")) * time.Millisecond)
			case 3:
				if _, err := st.Collect(ctx); err != nil {
					rt.Fatal(err)
				}
			}
			for _, p := range principals {
				if n := liveOf(p); n > bound {
					rt.Fatalf("principal %q holds %d live conversations", p, n)
				}
			}
		}
	})
}
