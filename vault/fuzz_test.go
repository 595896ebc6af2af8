package vault

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

// FuzzOpenRecord feeds arbitrary stored bytes to openRecord, what Get, List and Rekey run on
// every value they read: it must never panic, fail only with ErrTampered or ErrForeign, and
// yield a grant only when the bytes are a record this vault wrote under that very key
// (principal and server), and then exactly the grant written. The key is testKeyA, fixed, so
// the seeds below and any finding kept under testdata/fuzz stay records of this vault.
func FuzzOpenRecord(f *testing.F) {
	key := fixedKey(f, testKeyA)
	other := fixedKey(f, testKeyB)
	identities := []age.Identity{key.identity}
	type pair struct{ principal, server string }
	at := time.Unix(1_800_000_000, 0).UTC()
	written := map[pair]Grant{}
	sealed := map[string]pair{} // the records written in this run, which must open
	var seeds [][]byte
	for i, g := range []Grant{sampleGrant("alice", "files"), sampleGrant("bob", "files"), sampleGrant("alice", "mail")} {
		// Fixed ids: a record kept from an earlier run is the same grant.
		g.ID, g.Created, g.Updated = idPrefix+strings.Repeat(strconv.Itoa(i+1), 32), at, at
		written[pair{g.Principal, g.Server}] = g
		b, err := seal(g, key.recipient)
		if err != nil {
			f.Fatal(err)
		}
		sealed[string(b)] = pair{g.Principal, g.Server}
		seeds = append(seeds, b)
		if b, err = seal(g, other.recipient); err != nil { // another vault's record
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	// Sound encryptions under this key of what is no record of this vault.
	for _, plain := range []string{
		`{}`, `null`, `[]`, ``, `{"v":2}`,
		`{"v":1,"id":"g_00000000000000000000000000000000","principal":"alice","server":"files","kind":"user_grant","access_token":"a","created":"2027-01-15T08:00:00Z","updated":"2027-01-15T08:00:00Z","extra":1}`,
		`{"v":1,"id":"g_00000000000000000000000000000000","principal":"alice","server":"files","kind":"user_grant","access_token":"a\n","created":"2027-01-15T08:00:00Z","updated":"2027-01-15T08:00:00Z"}`,
		`{"v":1,"id":"x","principal":"alice","server":"files","kind":"user_grant","access_token":"a","created":"2027-01-15T08:00:00Z","updated":"2027-01-15T08:00:00Z"}`,
	} {
		var out bytes.Buffer
		w, err := age.Encrypt(&out, key.recipient)
		if err != nil {
			f.Fatal(err)
		}
		w.Write([]byte(plain))
		w.Close()
		seeds = append(seeds, out.Bytes())
	}
	for _, s := range seeds {
		f.Add(s)
		f.Add(s[:len(s)/2])
		f.Add(append(bytes.Clone(s), '\n'))
	}
	f.Add([]byte(nil))
	f.Add([]byte("age-encryption.org/v1\n"))
	f.Add([]byte("age-encryption.org/v1\n-> X25519 AAAA\nAAAA\n--- AAAA\n"))

	f.Fuzz(func(t *testing.T, value []byte) {
		for p, want := range written {
			g, err := openRecord(identities, p.principal, p.server, value)
			if err != nil && sealed[string(value)] == p {
				t.Fatalf("%v: a record written there does not open: %v", p, err)
			}
			if err != nil {
				if !errors.Is(err, ErrTampered) && !errors.Is(err, ErrForeign) {
					t.Fatalf("%v: %v, want ErrTampered or ErrForeign", p, err)
				}
				if !reflect.DeepEqual(g, Grant{}) {
					t.Fatalf("%v: an error came with a grant", p)
				}
				continue
			}
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("%v: opened to a grant this vault did not write there:\n %#v\nwritten\n %#v", p, g, want)
			}
		}
	})
}
