// Package flows holds the browser flows in progress of a daemon (a sign-in at an OpenID
// Provider, a grant asked of an authorization server): what the redirect back must find again,
// by the flow's state, bounded in all and per client, each taken once and within its time.
//
// A full table refuses the newcomer: a flow already started is never pushed out, so that nobody
// can end another's flow by starting many.
package flows

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"net/netip"
	"sync"
	"time"
)

// The reasons Add refuses a flow.
var (
	ErrFull       = errors.New("as many flows are in progress as may be")
	ErrClientFull = errors.New("the client's address holds as many flows in progress as it may")
)

// A Flow is one flow in progress.
type Flow[T any] struct {
	State   string       // the secret the redirect back carries; the table keeps its hash
	Started time.Time    // when the flow began: it lives the table's ttl from then
	Client  netip.Prefix // what it counts against (ClientOf)
	Value   T            // what the redirect back needs
}

// A Table holds the flows in progress, by the SHA-256 of their state. order holds them oldest
// first; every one lives ttl, so the oldest is also the first to expire, and expired ones are
// removed from its front: adding, taking and expiring are each O(1) (amortised), with no scan.
// It is safe for concurrent use.
type Table[T any] struct {
	now            func() time.Time
	ttl            time.Duration
	max, perClient int

	mu       sync.Mutex
	byState  map[[sha256.Size]byte]*list.Element // each Value is a *Flow[T] in order
	order    list.List
	byClient map[netip.Prefix]int
}

// New returns a table of at most max flows, perClient of them from one client, each living ttl.
func New[T any](now func() time.Time, ttl time.Duration, max, perClient int) *Table[T] {
	return &Table[T]{now: now, ttl: ttl, max: max, perClient: perClient,
		byState: map[[sha256.Size]byte]*list.Element{}, byClient: map[netip.Prefix]int{}}
}

// Add holds f in place of the flow of prev, if prev names one (a browser that starts again can
// no longer finish the flow its cookie named, since the new cookie replaces it), unless the
// table or f's client would then hold more than they may. A refused f changes nothing: prev's
// flow stays, as its cookie does.
func (t *Table[T]) Add(f Flow[T], prev string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(t.now())
	held, ofClient := len(t.byState), t.byClient[f.Client]
	var old *list.Element
	if prev != "" {
		if old = t.byState[sha256.Sum256([]byte(prev))]; old != nil {
			held--
			if old.Value.(*Flow[T]).Client == f.Client {
				ofClient--
			}
		}
	}
	switch {
	case held >= t.max:
		return ErrFull
	case ofClient >= t.perClient:
		return ErrClientFull
	}
	if old != nil {
		t.remove(old)
	}
	t.byState[sha256.Sum256([]byte(f.State))] = t.order.PushBack(&f)
	t.byClient[f.Client]++
	return nil
}

// Take removes and returns the flow of state, if it is there and young enough.
func (t *Table[T]) Take(state string) (Flow[T], bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byState[sha256.Sum256([]byte(state))]
	if !ok {
		return Flow[T]{}, false
	}
	f := *t.remove(e)
	if t.now().Sub(f.Started) >= t.ttl {
		return Flow[T]{}, false
	}
	return f, true
}

// Len is the number of flows held, expired ones included until they are removed.
func (t *Table[T]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byState)
}

// expire removes the expired flows from the front of order; the caller holds mu. Should the
// clock step back, a flow behind a younger one waits for it to expire first: it still counts
// against the bounds, and Take refuses it.
func (t *Table[T]) expire(now time.Time) {
	for e := t.order.Front(); e != nil; e = t.order.Front() {
		if now.Sub(e.Value.(*Flow[T]).Started) < t.ttl {
			return
		}
		t.remove(e)
	}
}

// remove forgets the flow of e; the caller holds mu.
func (t *Table[T]) remove(e *list.Element) *Flow[T] {
	f := t.order.Remove(e).(*Flow[T])
	delete(t.byState, sha256.Sum256([]byte(f.State)))
	if n := t.byClient[f.Client] - 1; n > 0 {
		t.byClient[f.Client] = n
	} else {
		delete(t.byClient, f.Client)
	}
	return f
}

// ClientOf is what a flow from the connection's remote address counts against: the IPv4
// address, or the IPv6 /64 (a host commonly holds a whole /64, so one bound per address would
// bound nothing). An address that does not parse counts as the zero prefix, shared by all such.
// Behind a reverse proxy this is the proxy's address, for every browser.
func ClientOf(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}
