package keys

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// A Ring holds the current signer and the previous public keys that still verify: tokens are
// signed with the current key and verified with any listed key. Rotating moves the current key to
// the previous ones; retiring a previous key makes the tokens it signed fail with an unknown kid.
// A Ring is safe for concurrent use.
type Ring struct {
	mu       sync.RWMutex
	current  *Signer
	previous []PublicKey
	set      *Set // current + previous, rebuilt on every change
}

// NewRing returns a ring signing with current and also verifying with previous.
func NewRing(current *Signer, previous ...PublicKey) (*Ring, error) {
	if current == nil {
		return nil, errors.New("keys: ring needs a current signer")
	}
	r := &Ring{current: current}
	r.previous = slices.DeleteFunc(slices.Clone(previous), func(p PublicKey) bool { return p.kid == current.pub.kid })
	set, err := NewSet(append([]PublicKey{current.pub}, r.previous...)...)
	if err != nil {
		return nil, err
	}
	r.set = set
	return r, nil
}

// Current returns the signer new tokens are signed with.
func (r *Ring) Current() *Signer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.current
}

// Rotate makes next the current signer; the old current key stays listed for verification until
// it is retired.
func (r *Ring) Rotate(next *Signer) error {
	if next == nil {
		return errors.New("keys: rotate to a nil signer")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if next.pub.kid == r.current.pub.kid {
		return nil
	}
	prev := slices.DeleteFunc(slices.Clone(r.previous), func(p PublicKey) bool { return p.kid == next.pub.kid })
	prev = append([]PublicKey{r.current.pub}, prev...)
	set, err := NewSet(append([]PublicKey{next.pub}, prev...)...)
	if err != nil {
		return err
	}
	r.current, r.previous, r.set = next, prev, set
	return nil
}

// Retire removes a previous key. The current key cannot be retired; rotate away from it first.
func (r *Ring) Retire(kid string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kid == r.current.pub.kid {
		return fmt.Errorf("keys: cannot retire the current key %s", kid)
	}
	i := slices.IndexFunc(r.previous, func(p PublicKey) bool { return p.kid == kid })
	if i < 0 {
		return fmt.Errorf("keys: retire: no previous key %s", kid)
	}
	prev := slices.Delete(slices.Clone(r.previous), i, i+1)
	set, err := NewSet(append([]PublicKey{r.current.pub}, prev...)...)
	if err != nil {
		return err
	}
	r.previous, r.set = prev, set
	return nil
}

// Set returns the public keys, current first: the JWKS to publish.
func (r *Ring) Set() *Set {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.set
}

// Key returns the listed key named kid.
func (r *Ring) Key(ctx context.Context, kid string) (PublicKey, bool) {
	return r.Set().Key(ctx, kid)
}

// Lookup returns the listed key named kid.
func (r *Ring) Lookup(kid string) (PublicKey, bool) { return r.Set().Lookup(kid) }
