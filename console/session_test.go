package console

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// clock is a test clock: time moves only when the test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSessionLifetime(t *testing.T) {
	tests := []struct {
		name  string
		steps []time.Duration // uses, each after this long
		alive bool
	}{
		{"fresh", []time.Duration{0}, true},
		{"used within the idle timeout, up to the ttl", []time.Duration{20 * time.Minute, 20 * time.Minute, 19 * time.Minute}, true},
		{"idle too long", []time.Duration{30 * time.Minute}, false},
		{"past the ttl however used", []time.Duration{25 * time.Minute, 25 * time.Minute, 25 * time.Minute}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			ss := newSessions(c.Now, time.Hour, 30*time.Minute, 10)
			id, _ := ss.create(session{Subject: "iss#id1"})
			var err error
			for _, d := range tc.steps {
				c.Add(d)
				if _, err = ss.get(id); err != nil {
					break
				}
			}
			if alive := err == nil; alive != tc.alive {
				t.Errorf("alive %v, want %v (%v)", alive, tc.alive, err)
			}
		})
	}
}

func TestSessionsBoundedAndEnded(t *testing.T) {
	c := newClock()
	ss := newSessions(c.Now, time.Hour, 30*time.Minute, 2)
	a, sa := ss.create(session{Subject: "a"})
	c.Add(time.Minute)
	b, _ := ss.create(session{Subject: "b"})
	c.Add(time.Minute)
	if _, err := ss.get(b); err != nil { // b is used: a is now the closest to its end
		t.Fatal(err)
	}
	x, _ := ss.create(session{Subject: "c"})
	if ss.len() != 2 {
		t.Errorf("%d sessions held, want 2", ss.len())
	}
	if _, err := ss.get(a); !errors.Is(err, errNoSession) {
		t.Errorf("the session closest to its end was kept: %v", err)
	}
	for _, id := range []string{b, x} {
		if _, err := ss.get(id); err != nil {
			t.Errorf("a newer session was evicted: %v", err)
		}
	}
	ss.end(b)
	if _, err := ss.get(b); !errors.Is(err, errNoSession) {
		t.Errorf("an ended session lives on: %v", err)
	}
	if sa.CSRF == "" || len(a) < 50 {
		t.Errorf("weak session: id %d chars, csrf %q", len(a), sa.CSRF)
	}
	for _, id := range []string{"", "nonsense", sa.CSRF} {
		if _, err := ss.get(id); !errors.Is(err, errNoSession) {
			t.Errorf("get(%q) = %v", id, err)
		}
	}
}
