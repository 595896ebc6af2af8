package flows

import (
	"crypto/rand"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestTableBounds walks the flows in progress along an injected clock: past a bound the
// newcomer is refused and nothing held is pushed out; expired flows leave from the front of
// the queue as flows are added; a taken one frees its place, and a browser that starts again
// gives up its earlier one.
func TestTableBounds(t *testing.T) {
	t0 := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	now := t0
	ls := New[int](func() time.Time { return now }, 10*time.Minute, 4, 2)
	a, b, c := ClientOf("192.0.2.1:1000"), ClientOf("192.0.2.2:1000"), ClientOf("[2001:db8::1]:1000")
	states := map[string]string{}

	steps := []struct {
		at     time.Duration // since t0
		op     string        // add or take
		name   string        // the flow's name in the test
		client netip.Prefix  // of an add
		want   error         // of an add
		ok     bool          // of a take
		held   int           // len afterwards
		prev   string        // of an add: the sign-in the browser's cookie names
	}{
		{0, "add", "a1", a, nil, false, 1, ""},
		{0, "add", "a2", a, nil, false, 2, ""},
		{0, "add", "a3", a, ErrClientFull, false, 2, ""},
		{time.Minute, "add", "b1", b, nil, false, 3, ""},
		{time.Minute, "add", "b2", b, nil, false, 4, ""},
		{time.Minute, "add", "c1", c, ErrFull, false, 4, ""},
		{time.Minute, "take", "a1", a, nil, true, 3, ""},
		{time.Minute, "take", "a1", a, nil, false, 3, ""}, // once only
		{time.Minute, "add", "c1", c, nil, false, 4, ""},
		{time.Minute, "add", "a3", a, ErrFull, false, 4, ""}, // a2, b1, b2, c1 all stay
		{time.Minute, "add", "b3", b, nil, false, 4, "b1"},   // in b1's place, full or not
		// a2 is ten minutes old: the next add removes it from the front, and takes its place.
		{10 * time.Minute, "add", "c2", c, nil, false, 4, ""},
		{10 * time.Minute, "take", "a2", a, nil, false, 4, ""},
		{10 * time.Minute, "take", "b1", b, nil, false, 4, ""},
		{10 * time.Minute, "take", "b3", b, nil, true, 3, ""},
		{10 * time.Minute, "add", "c3", c, ErrClientFull, false, 3, ""},
		// The browser of c2 starts again: c3 takes c2's place.
		{10 * time.Minute, "add", "c3", c, nil, false, 3, "c2"},
		{10 * time.Minute, "take", "c2", c, nil, false, 3, ""},
		// A browser of b2 starts again from c, which holds its share: refused, b2 stays.
		{10 * time.Minute, "add", "c4", c, ErrClientFull, false, 3, "b2"},
		// b2 and c1 are ten minutes old: held until an add removes them, but never taken.
		{11 * time.Minute, "take", "c1", c, nil, false, 2, ""},
		{11 * time.Minute, "add", "a4", a, nil, false, 2, ""}, // b2 leaves; c3 stays
		{19 * time.Minute, "take", "c3", c, nil, true, 1, ""},
		{21 * time.Minute, "add", "b3", b, nil, false, 1, ""}, // a4 leaves
	}
	for i, st := range steps {
		now = t0.Add(st.at)
		switch st.op {
		case "add":
			states[st.name] = rand.Text()
			err := ls.Add(Flow[int]{State: states[st.name], Started: now, Client: st.client, Value: i}, states[st.prev])
			if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
				t.Fatalf("step %d: add %s: %v, want %v", i, st.name, err, st.want)
			}
		case "take":
			f, ok := ls.Take(states[st.name])
			if ok != st.ok || (ok && f.State != states[st.name]) {
				t.Fatalf("step %d: take %s: %v, want %v", i, st.name, ok, st.ok)
			}
		}
		if n := ls.Len(); n != st.held {
			t.Fatalf("step %d (%s %s): %d held, want %d", i, st.op, st.name, n, st.held)
		}
		// The queue, the index and the per-client counts always agree.
		sum := 0
		for _, n := range ls.byClient {
			sum += n
		}
		if ls.order.Len() != len(ls.byState) || sum != len(ls.byState) {
			t.Fatalf("step %d: queue %d, index %d, per client %d", i, ls.order.Len(), len(ls.byState), sum)
		}
	}
}

func TestClientOf(t *testing.T) {
	tests := []struct{ remote, want string }{
		{"192.0.2.7:4711", "192.0.2.7/32"},
		{"[::ffff:192.0.2.7]:4711", "192.0.2.7/32"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"@", "invalid Prefix"},
	}
	for _, tt := range tests {
		if got := ClientOf(tt.remote).String(); got != tt.want {
			t.Errorf("ClientOf(%q) = %s, want %s", tt.remote, got, tt.want)
		}
	}
}
