package waiting

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestMemoryProperties runs random puts, takes and clock moves against a model of what
// the memory store must hold: a put is refused exactly when the live continuations (expired
// ones do not count) leave no room, with the reason Admit gives; a continuation is taken once,
// by its principal, before its expiry; and the store never holds more than its bounds.
func TestMemoryProperties(t *testing.T) {
	lim := Limits{MaxPending: 8, MaxBytes: 1200, PrincipalPending: 4, PrincipalBytes: 500}
	principals := []string{"a", "b", "c", "d"}
	rapid.Check(t, func(rt *rapid.T) {
		clock := newTestClock()
		s := NewMemory(clock.now)
		ctx := context.Background()
		type live struct {
			principal string
			size      int
			expiry    time.Time
		}
		model := map[string]live{}
		var issued []string
		usageOf := func(principal string) (mine, all Usage) {
			for _, e := range model {
				if !clock.now().Before(e.expiry) {
					continue
				}
				all.Count++
				all.Bytes += e.size
				if e.principal == principal {
					mine.Count++
					mine.Bytes += e.size
				}
			}
			return mine, all
		}
		for step := range rapid.IntRange(1, 80).Draw(rt, "steps") {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0:
				p := rapid.SampledFrom(principals).Draw(rt, "principal")
				size := rapid.IntRange(0, 600).Draw(rt, "size")
				ttl := time.Duration(rapid.IntRange(1, 5).Draw(rt, "ttl")) * time.Second
				nonce := fmt.Sprint("n", step)
				mine, all := usageOf(p)
				want := Admit(size, mine, all, lim)
				e := entry(p, nonce, size, clock.now().Add(ttl))
				if err := s.Put(ctx, e, lim); !errors.Is(err, want) || (want == nil) != (err == nil) {
					rt.Fatalf("put %d bytes for %s: %v, want %v (mine %+v, all %+v)", size, p, err, want, mine, all)
				}
				if want == nil {
					model[nonce] = live{principal: p, size: size, expiry: e.Expiry}
					issued = append(issued, nonce)
				}
			case 1:
				if len(issued) == 0 {
					continue
				}
				nonce := rapid.SampledFrom(append(issued, "never-issued")).Draw(rt, "nonce")
				p := rapid.SampledFrom(principals).Draw(rt, "taker")
				e, ok := model[nonce]
				want := ok && e.principal == p && clock.now().Before(e.expiry)
				data, err := s.Take(ctx, p, nonce)
				if got := err == nil; got != want {
					rt.Fatalf("take %s by %s: %v, want taken=%v", nonce, p, err, want)
				}
				if err == nil && len(data) != e.size {
					rt.Fatalf("took %d bytes, stored %d", len(data), e.size)
				}
				if ok && e.principal == p {
					delete(model, nonce) // taken or expired: gone either way
				}
			case 2:
				clock.advance(time.Duration(rapid.IntRange(1, 3).Draw(rt, "advance")) * time.Second)
			}
			// What the store holds (expired entries included) stays within every bound, and
			// its counts are the sum of its entries.
			s.mu.Lock()
			var sum Usage
			per := map[string]Usage{}
			for _, e := range s.entries {
				sum.Count++
				sum.Bytes += len(e.Data)
				u := per[e.Principal]
				per[e.Principal] = Usage{Count: u.Count + 1, Bytes: u.Bytes + len(e.Data)}
			}
			counted, countedPer := s.all, maps.Clone(s.mine)
			s.mu.Unlock()
			if sum != counted || sum.Count > lim.MaxPending || sum.Bytes > lim.MaxBytes {
				rt.Fatalf("holds %+v, counted %+v, bounds %+v", sum, counted, lim)
			}
			if !maps.Equal(per, countedPer) {
				rt.Fatalf("principals hold %+v, counted %+v", per, countedPer)
			}
			for p, u := range per {
				if u.Count > lim.PrincipalPending || u.Bytes > lim.PrincipalBytes {
					rt.Fatalf("%s holds %+v, bounds %+v", p, u, lim)
				}
			}
		}
	})
}
