package console

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"net/netip"
	"sync"
	"time"
)

// loginTTL bounds how long a sign-in may take at the provider.
const loginTTL = 10 * time.Minute

// A login is one sign-in in progress: what the callback must find again.
type login struct {
	state    string
	nonce    string
	verifier string // the PKCE code verifier
	returnTo string
	started  time.Time
	client   netip.Prefix // what the sign-in counts against (clientOf)
}

// The reasons a sign-in is not started. A full table refuses the newcomer: a sign-in already
// started is never pushed out, so that nobody can end another's sign-in by starting many.
var (
	errSignInsFull       = errors.New("the console holds as many sign-ins in progress as it may")
	errClientSignInsFull = errors.New("the client's address holds as many sign-ins in progress as it may")
)

// logins are the sign-ins in progress, by the SHA-256 of their state; each is taken once. They
// are bounded in all (max) and per client (perClient). order holds them oldest first; every one
// lives loginTTL, so the oldest is also the first to expire, and expired ones are removed from
// its front: adding, taking and expiring are each O(1) (amortised), with no scan of the table.
type logins struct {
	now            func() time.Time
	max, perClient int

	mu       sync.Mutex
	byState  map[[sha256.Size]byte]*list.Element // each Value is a *login in order
	order    list.List
	byClient map[netip.Prefix]int
}

func newLogins(now func() time.Time, max, perClient int) *logins {
	return &logins{now: now, max: max, perClient: perClient,
		byState: map[[sha256.Size]byte]*list.Element{}, byClient: map[netip.Prefix]int{}}
}

// add holds l in place of the sign-in of prev, if prev names one (a browser that starts again
// can no longer finish the sign-in its cookie named, since the new cookie replaces it), unless
// the table or l's client would then hold more than they may. A refused l changes nothing:
// prev's sign-in stays, as its cookie does.
func (ls *logins) add(l login, prev string) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expire(ls.now())
	held, ofClient := len(ls.byState), ls.byClient[l.client]
	var old *list.Element
	if prev != "" {
		if old = ls.byState[sha256.Sum256([]byte(prev))]; old != nil {
			held--
			if old.Value.(*login).client == l.client {
				ofClient--
			}
		}
	}
	switch {
	case held >= ls.max:
		return errSignInsFull
	case ofClient >= ls.perClient:
		return errClientSignInsFull
	}
	if old != nil {
		ls.remove(old)
	}
	ls.byState[sha256.Sum256([]byte(l.state))] = ls.order.PushBack(&l)
	ls.byClient[l.client]++
	return nil
}

// take removes and returns the sign-in of state, if it is there and young enough.
func (ls *logins) take(state string) (login, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e, ok := ls.byState[sha256.Sum256([]byte(state))]
	if !ok {
		return login{}, false
	}
	l := *ls.remove(e)
	if ls.now().Sub(l.started) >= loginTTL {
		return login{}, false
	}
	return l, true
}

// len is the number of sign-ins held, expired ones included until they are removed.
func (ls *logins) len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.byState)
}

// expire removes the expired sign-ins from the front of order; the caller holds mu. Should the
// clock step back, a sign-in behind a younger one waits for it to expire first: it still counts
// against the bounds, and take refuses it.
func (ls *logins) expire(now time.Time) {
	for e := ls.order.Front(); e != nil; e = ls.order.Front() {
		if now.Sub(e.Value.(*login).started) < loginTTL {
			return
		}
		ls.remove(e)
	}
}

// remove forgets the sign-in of e; the caller holds mu.
func (ls *logins) remove(e *list.Element) *login {
	l := ls.order.Remove(e).(*login)
	delete(ls.byState, sha256.Sum256([]byte(l.state)))
	if n := ls.byClient[l.client] - 1; n > 0 {
		ls.byClient[l.client] = n
	} else {
		delete(ls.byClient, l.client)
	}
	return l
}

// clientOf is what a sign-in from the connection's remote address counts against: the IPv4
// address, or the IPv6 /64 (a host commonly holds a whole /64, so one bound per address would
// bound nothing). An address that does not parse counts as the zero prefix, shared by all such.
// Behind a reverse proxy this is the proxy's address, for every browser.
func clientOf(remoteAddr string) netip.Prefix {
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
