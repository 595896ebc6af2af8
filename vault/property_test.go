package vault

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"filippo.io/age"
	"pgregory.net/rapid"
)

// TestVaultModelProperty runs random sequences of Put, Get, Revoke and List against a map, on
// each backend, with the vault closed and opened again between steps and keys rotated: a new key added in front,
// Rekey, old keys dropped (also while records still need them). The vault agrees with the
// model at every step: each grant reads back as it was put (its id and times as the vault
// filled them in), a principal never holds more than the bound, a record whose key was
// dropped reads as ErrTampered and never as a grant, and Rekey re-encrypts exactly the
// records an older key still reads.
func TestVaultModelProperty(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { rapid.Check(t, vaultModel(b.start(t))) })
	}
}

// vaultModel is the property of TestVaultModelProperty over the places ps opens.
func vaultModel(ps places) func(*rapid.T) {
	ctx := context.Background()
	const bound = 3
	// Names that are prefixes of one another, and non-ASCII ones: the keys' separator must keep
	// each pair apart.
	principals := []string{"a", "ab", "a b", "é", "b"}
	servers := []string{"s", "s2", "t", "ü"}
	type pair struct{ principal, server string }
	type entry struct {
		g   Grant // as Get must return it; g.ID == "" while the vault's choice is not yet seen
		gen int   // the key it was written to
	}

	return func(rt *rapid.T) {
		place, remove, err := ps.fresh()
		if err != nil {
			rt.Fatal(err)
		}
		defer remove()
		clock := newTestClock()

		// gens[i] is the key of generation i; held lists the generations the vault is open
		// with, the current one first.
		var gens []*Key
		newGen := func() int {
			id, err := age.GenerateX25519Identity()
			if err != nil {
				rt.Fatal(err)
			}
			gens = append(gens, &Key{identity: id, recipient: id.Recipient(), source: "generation key"})
			return len(gens) - 1
		}
		held := []int{newGen()}
		var v *Vault
		open := func() {
			keys := make([]*Key, len(held))
			for i, g := range held {
				keys[i] = gens[g]
			}
			v, err = ps.open(place, keys, Options{MaxPerPrincipal: bound, Now: clock.Now})
			if err != nil {
				rt.Fatal(err)
			}
		}
		open()
		defer func() { v.Close() }()
		readable := func(e entry) bool { return slices.Contains(held, e.gen) }

		model := map[pair]*entry{}
		count := func(p string) int {
			n := 0
			for k := range model {
				if k.principal == p {
					n++
				}
			}
			return n
		}
		pairGen := rapid.Custom(func(t *rapid.T) pair {
			return pair{rapid.SampledFrom(principals).Draw(t, "principal"), rapid.SampledFrom(servers).Draw(t, "server")}
		})
		// checkGrant compares a grant read back with the model, learning the id the vault
		// chose for a grant put without one.
		checkGrant := func(e *entry, got Grant) {
			want := e.g
			if want.ID == "" {
				if !validID(got.ID) {
					rt.Fatalf("id %q is not a vault id", got.ID)
				}
				want.ID = got.ID
				e.g.ID = got.ID
			}
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("read back\n %#v\nwant\n %#v", got, want)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				p := pairGen.Draw(t, "pair")
				clock.Advance(time.Second)
				g := Grant{
					Principal:    p.principal,
					Server:       p.server,
					Kind:         rapid.SampledFrom([]Kind{KindUserGrant, KindTokenExchange}).Draw(t, "kind"),
					Subject:      rapid.StringMatching(`[a-z0-9|]{0,12}`).Draw(t, "subject"),
					AccessToken:  rapid.StringMatching(`[ -~]{1,40}`).Draw(t, "access"),
					RefreshToken: rapid.StringMatching(`([ -~]{1,40})?`).Draw(t, "refresh"),
					TokenType:    rapid.SampledFrom([]string{"", "Bearer", "DPoP"}).Draw(t, "type"),
					Scopes:       rapid.SliceOfN(rapid.StringMatching(`[a-z:]{1,8}`), 0, 3).Draw(t, "scopes"),
				}
				if rapid.Bool().Draw(t, "expires") {
					g.Expiry = time.Unix(rapid.Int64Range(1e9, 4e9).Draw(t, "expiry"), rapid.Int64Range(0, 1e9-1).Draw(t, "nanos"))
				}
				old, had := model[p]
				// A refresh keeps the id and creation time; a new grant may bring its own id.
				switch {
				case had && old.g.ID != "" && rapid.Bool().Draw(t, "refresh"):
					g.ID, g.Created = old.g.ID, old.g.Created
				case rapid.Bool().Draw(t, "own id"):
					g.ID = newID()
				}
				err := v.Put(ctx, g)
				if !had && count(p.principal) >= bound {
					if !errors.Is(err, ErrTooMany) {
						t.Fatalf("Put past the bound: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Put: %v", err)
				}
				want := g
				want.Updated = clock.Now()
				if want.Created.IsZero() {
					want.Created = clock.Now()
				}
				want.Expiry = want.Expiry.UTC()
				if len(want.Scopes) == 0 {
					want.Scopes = nil
				}
				model[p] = &entry{g: want, gen: held[0]}
			},
			"get": func(t *rapid.T) {
				p := pairGen.Draw(t, "pair")
				got, err := v.Get(ctx, p.principal, p.server)
				e, ok := model[p]
				switch {
				case !ok:
					if !errors.Is(err, ErrNoGrant) {
						t.Fatalf("Get of nothing: %v (%v)", err, got)
					}
				case !readable(*e):
					if !errors.Is(err, ErrTampered) || !reflect.DeepEqual(got, Grant{}) {
						t.Fatalf("Get of a record under a dropped key: %v (%v)", err, got)
					}
				default:
					if err != nil {
						t.Fatalf("Get: %v", err)
					}
					checkGrant(e, got)
				}
			},
			"revoke": func(t *rapid.T) {
				p := pairGen.Draw(t, "pair")
				err := v.Revoke(ctx, p.principal, p.server)
				if _, ok := model[p]; !ok {
					if !errors.Is(err, ErrNoGrant) {
						t.Fatalf("Revoke of nothing: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Revoke: %v", err)
				}
				delete(model, p)
			},
			"list": func(t *rapid.T) {
				principal := rapid.SampledFrom(principals).Draw(t, "principal")
				infos, err := v.List(ctx, principal)
				var want []pair
				unreadable := false
				for k, e := range model {
					if k.principal == principal {
						want = append(want, k)
						unreadable = unreadable || !readable(*e)
					}
				}
				if unreadable {
					if !errors.Is(err, ErrTampered) {
						t.Fatalf("List over a record under a dropped key: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				slices.SortFunc(want, func(a, b pair) int { return bytes.Compare([]byte(a.server), []byte(b.server)) })
				if len(infos) != len(want) {
					t.Fatalf("List: %d grants, want %d", len(infos), len(want))
				}
				for i, k := range want {
					e := model[k]
					if e.g.ID == "" {
						e.g.ID = infos[i].ID
					}
					if !reflect.DeepEqual(infos[i], e.g.Info()) {
						t.Fatalf("List[%d]:\n %+v\nwant\n %+v", i, infos[i], e.g.Info())
					}
				}
			},
			"reopen": func(t *rapid.T) {
				if err := v.Close(); err != nil {
					t.Fatal(err)
				}
				open()
			},
			"rotate": func(t *rapid.T) {
				// A new current key in front of those held.
				if err := v.Close(); err != nil {
					t.Fatal(err)
				}
				held = append([]int{newGen()}, held...)
				open()
			},
			"rekey": func(t *rapid.T) {
				n, err := v.Rekey(ctx)
				want, unreadable := 0, false
				for _, e := range model {
					switch {
					case !readable(*e):
						unreadable = true
					case e.gen != held[0]:
						want++
						e.gen = held[0]
					}
				}
				if n != want {
					t.Fatalf("Rekey rewrote %d, want %d", n, want)
				}
				if unreadable != (err != nil) || (err != nil && !errors.Is(err, ErrTampered)) {
					t.Fatalf("Rekey: %v (records under dropped keys: %v)", err, unreadable)
				}
			},
			"drop old keys": func(t *rapid.T) {
				if len(held) == 1 {
					t.Skip("one key held")
				}
				if err := v.Close(); err != nil {
					t.Fatal(err)
				}
				held = held[:1]
				open()
			},
		})
	}
}
