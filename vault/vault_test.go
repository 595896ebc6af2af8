package vault

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/store"
)

// TestPutGet: a stored grant comes back as it was put, with its id and times filled in; a
// second Put for the same pair replaces it, keeping what the caller kept.
func TestPutGet(t *testing.T) { eachBackend(t, testPutGet) }

func testPutGet(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	clock := newTestClock()
	v := open([]*Key{k}, Options{Now: clock.Now})

	in := sampleGrant("alice", "files")
	if err := v.Put(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	if !validID(got.ID) {
		t.Errorf("id %q is not a fresh vault id", got.ID)
	}
	want := in
	want.ID, want.Created, want.Updated = got.ID, clock.Now(), clock.Now()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}

	// A refresh: the caller changes the tokens of what it read and puts it back.
	clock.Advance(time.Hour)
	got.AccessToken, got.Expiry = "at-refreshed", clock.Now().Add(time.Hour)
	if err := v.Put(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != got.ID || !again.Created.Equal(want.Created) || !again.Updated.Equal(clock.Now()) || again.AccessToken != "at-refreshed" {
		t.Fatalf("after a refresh: %#v", again)
	}

	// Two grants of one principal never share an id.
	if err := v.Put(ctx, sampleGrant("alice", "mail")); err != nil {
		t.Fatal(err)
	}
	infos, err := v.List(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Server != "files" || infos[1].Server != "mail" || infos[0].ID == infos[1].ID {
		t.Fatalf("list: %+v", infos)
	}
	if !infos[0].HasRefreshToken {
		t.Error("list: has_refresh_token is false for a grant with a refresh token")
	}
}

// TestInvalidInput: every bad argument is ErrInvalid, with a message that says what is wrong
// and never quotes a token.
func TestInvalidInput(t *testing.T) { eachBackend(t, testInvalidInput) }

func testInvalidInput(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	v := open([]*Key{k}, Options{})

	with := func(change func(*Grant)) Grant {
		g := sampleGrant("alice", "files")
		change(&g)
		return g
	}
	puts := []struct {
		name string
		g    Grant
		msg  string // in the error
	}{
		{"empty principal", with(func(g *Grant) { g.Principal = "" }), "principal is empty"},
		{"empty server", with(func(g *Grant) { g.Server = "" }), "server is empty"},
		{"principal with the separator", with(func(g *Grant) { g.Principal = "ali\x00ce" }), "control character at byte 3"},
		{"server with the separator", with(func(g *Grant) { g.Server = "fi\x00les" }), "server"},
		{"principal with a newline", with(func(g *Grant) { g.Principal = "alice\n" }), "control character"},
		{"principal not UTF-8", with(func(g *Grant) { g.Principal = "al\xffice" }), "not valid UTF-8"},
		{"principal too long", with(func(g *Grant) { g.Principal = strings.Repeat("p", maxPrincipal+1) }), "at most 256"},
		{"server too long", with(func(g *Grant) { g.Server = strings.Repeat("s", maxServer+1) }), "at most 128"},
		{"no kind", with(func(g *Grant) { g.Kind = "" }), "kind"},
		{"unknown kind", with(func(g *Grant) { g.Kind = "password" }), `kind "password"`},
		{"no access token", with(func(g *Grant) { g.AccessToken = "" }), "access token is empty"},
		{"access token with a line break", with(func(g *Grant) { g.AccessToken = "at-secret\r\nX-Evil: 1" }), "access token has a byte outside %x20-7E at offset 9"},
		{"refresh token not ASCII", with(func(g *Grant) { g.RefreshToken = "rt-secret-é" }), "refresh token has a byte outside"},
		{"access token too long", with(func(g *Grant) { g.AccessToken = strings.Repeat("a", maxToken+1) }), "access token is 16385 bytes"},
		{"id not the vault's", with(func(g *Grant) { g.ID = "at-alice-files-secret" }), "not a vault grant id"},
		{"id upper case", with(func(g *Grant) { g.ID = "g_" + strings.Repeat("A", 32) }), "not a vault grant id"},
		{"empty scope", with(func(g *Grant) { g.Scopes = []string{"read", ""} }), "scopes[1]"},
		{"scope with a space", with(func(g *Grant) { g.Scopes = []string{"read write"} }), "scopes[0]"},
		{"scope with a quote", with(func(g *Grant) { g.Scopes = []string{`a"b`} }), "scope-token"},
		{"token type with a space", with(func(g *Grant) { g.TokenType = "Bearer x" }), "token type"},
		{"subject with a control character", with(func(g *Grant) { g.Subject = "a\tb" }), "subject"},
	}
	for _, tc := range puts {
		t.Run("put/"+tc.name, func(t *testing.T) {
			err := v.Put(ctx, tc.g)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not say %q", err, tc.msg)
			}
			for _, tok := range []string{tc.g.AccessToken, tc.g.RefreshToken} {
				if tok != "" && strings.Contains(err.Error(), tok) {
					t.Errorf("message %q quotes a token", err)
				}
			}
		})
	}

	pairs := []struct{ principal, server string }{
		{"", "files"}, {"alice", ""}, {"a\x00b", "files"}, {"alice", "x\x00y"},
		{strings.Repeat("p", maxPrincipal+1), "files"}, {"alice", "\xff"},
	}
	for _, p := range pairs {
		name := fmt.Sprintf("%q at %q", p.principal, p.server)
		if _, err := v.Get(ctx, p.principal, p.server); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get %s: %v, want ErrInvalid", name, err)
		}
		if err := v.Revoke(ctx, p.principal, p.server); !errors.Is(err, ErrInvalid) {
			t.Errorf("Revoke %s: %v, want ErrInvalid", name, err)
		}
	}
	for _, p := range []string{"", "a\x00", strings.Repeat("p", maxPrincipal+1)} {
		if _, err := v.List(ctx, p); !errors.Is(err, ErrInvalid) {
			t.Errorf("List %q: %v, want ErrInvalid", p, err)
		}
	}

	// Nothing refused was stored.
	if infos, err := v.List(ctx, "alice"); err != nil || len(infos) != 0 {
		t.Fatalf("after refused puts: %v %v", infos, err)
	}
}

// TestNoGrant: reading, revoking and listing what was never stored, or was revoked.
func TestNoGrant(t *testing.T) { eachBackend(t, testNoGrant) }

func testNoGrant(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	v := open([]*Key{k}, Options{})
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	// "alice" at "files" must not be found as "alice" + "\x00" + "fil", or "alic" + ...
	cases := []struct{ principal, server string }{
		{"bob", "files"}, {"alice", "mail"}, {"alice", "file"}, {"alic", "files"}, {"alice", "files2"},
	}
	for _, c := range cases {
		if _, err := v.Get(ctx, c.principal, c.server); !errors.Is(err, ErrNoGrant) {
			t.Errorf("Get %q %q: %v, want ErrNoGrant", c.principal, c.server, err)
		}
		if err := v.Revoke(ctx, c.principal, c.server); !errors.Is(err, ErrNoGrant) {
			t.Errorf("Revoke %q %q: %v, want ErrNoGrant", c.principal, c.server, err)
		}
	}
	for _, p := range []string{"bob", "alic", "alice "} {
		if infos, err := v.List(ctx, p); err != nil || len(infos) != 0 {
			t.Errorf("List %q: %v %v, want none", p, infos, err)
		}
	}
	if err := v.Revoke(ctx, "alice", "files"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Get(ctx, "alice", "files"); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("Get after Revoke: %v, want ErrNoGrant", err)
	}
	if err := v.Revoke(ctx, "alice", "files"); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("second Revoke: %v, want ErrNoGrant", err)
	}
}

// TestTamperedRecord changes a stored record every way a byte can be changed — each byte
// flipped in turn, each truncation, a byte appended — and reads it back through Get: every
// one is ErrTampered or ErrForeign, never a grant, never a panic.
func TestTamperedRecord(t *testing.T) { eachBackend(t, testTamperedRecord) }

func testTamperedRecord(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	v := open([]*Key{k}, Options{})
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	good := raw(t, v, "alice", "files")

	// Every byte flipped in turn goes into the file and is read back through Get, one commit
	// each. The finer changes (one bit of each byte, each truncation, bytes appended) go
	// through openRecord, what Get runs on the bytes it read, to spare a commit apiece.
	check := func(what string, g Grant, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s read as a grant: %v", what, g)
		}
		if !errors.Is(err, ErrTampered) && !errors.Is(err, ErrForeign) {
			t.Fatalf("%s: %v, want ErrTampered or ErrForeign", what, err)
		}
		if !reflect.DeepEqual(g, Grant{}) {
			t.Fatalf("%s: an error came with a grant: %v", what, g)
		}
	}
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0xff
		setRaw(t, v, "alice", "files", b)
		g, err := v.Get(ctx, "alice", "files")
		check(fmt.Sprintf("byte %d of %d flipped", i, len(good)), g, err)
	}
	for i := range good {
		for bit := range 8 {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			g, err := openRecord(v.identities, "alice", "files", b)
			check(fmt.Sprintf("bit %d of byte %d flipped", bit, i), g, err)
		}
	}
	for n := range good {
		g, err := openRecord(v.identities, "alice", "files", good[:n])
		check(fmt.Sprintf("truncated to %d bytes", n), g, err)
	}
	for _, tail := range [][]byte{{0}, {'\n'}, good} {
		g, err := openRecord(v.identities, "alice", "files", append(append([]byte(nil), good...), tail...))
		check(fmt.Sprintf("%d bytes appended", len(tail)), g, err)
	}
	if g, err := openRecord(v.identities, "alice", "files", good); err != nil {
		t.Fatalf("the record as written does not open: %v (%v)", err, g)
	}
	// A tampered record fails List and is removed by Revoke.
	if _, err := v.List(ctx, "alice"); !errors.Is(err, ErrTampered) {
		t.Fatalf("List over a tampered record: %v, want ErrTampered", err)
	}
	if err := v.Revoke(ctx, "alice", "files"); err != nil {
		t.Fatalf("Revoke of a tampered record: %v", err)
	}
	if infos, err := v.List(ctx, "alice"); err != nil || len(infos) != 0 {
		t.Fatalf("List after Revoke: %v %v", infos, err)
	}
}

// TestForeignRecord moves sound records to keys they were not written under: swapped between
// two principals, copied to another server of the same principal. Each is ErrForeign.
func TestForeignRecord(t *testing.T) { eachBackend(t, testForeignRecord) }

func testForeignRecord(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	v := open([]*Key{k}, Options{})
	for _, g := range []Grant{sampleGrant("alice", "files"), sampleGrant("bob", "files"), sampleGrant("alice", "mail")} {
		if err := v.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := raw(t, v, "alice", "files"), raw(t, v, "bob", "files")
	setRaw(t, v, "alice", "files", bob)
	setRaw(t, v, "bob", "files", alice)
	setRaw(t, v, "alice", "mail", alice)
	setRaw(t, v, "carol", "files", alice) // a principal that never had a grant

	cases := []struct{ principal, server string }{
		{"alice", "files"}, {"bob", "files"}, {"alice", "mail"}, {"carol", "files"},
	}
	for _, c := range cases {
		g, err := v.Get(ctx, c.principal, c.server)
		if !errors.Is(err, ErrForeign) {
			t.Errorf("Get %s at %s: %v (%v), want ErrForeign", c.principal, c.server, err, g)
		}
		if err != nil && !reflect.DeepEqual(g, Grant{}) {
			t.Errorf("Get %s at %s: an error came with a grant", c.principal, c.server)
		}
		if _, err := v.List(ctx, c.principal); !errors.Is(err, ErrForeign) {
			t.Errorf("List %s: %v, want ErrForeign", c.principal, err)
		}
	}
	// Put back where they belong, they read again.
	setRaw(t, v, "alice", "files", alice)
	if g, err := v.Get(ctx, "alice", "files"); err != nil || g.AccessToken != "at-alice-files-secret" {
		t.Fatalf("restored record: %v %v", g, err)
	}
}

// TestWrongKey: a vault opened with another key reads nothing it did not write; with both
// keys, it reads everything, and Rekey moves every record to the current key.
func TestWrongKey(t *testing.T) { eachBackend(t, testWrongKey) }

func testWrongKey(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	oldKey, _ := writeKey(t, dir, "old.key")
	newKey, _ := writeKey(t, dir, "new.key")

	v := open([]*Key{oldKey}, Options{})
	for _, s := range []string{"files", "mail", "calendar"} {
		if err := v.Put(ctx, sampleGrant("alice", s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	v = open([]*Key{newKey}, Options{})
	if _, err := v.Get(ctx, "alice", "files"); !errors.Is(err, ErrTampered) {
		t.Fatalf("Get under another key: %v, want ErrTampered", err)
	}
	if _, err := v.List(ctx, "alice"); !errors.Is(err, ErrTampered) {
		t.Fatalf("List under another key: %v, want ErrTampered", err)
	}
	n, err := v.Rekey(ctx)
	if n != 0 || !errors.Is(err, ErrTampered) || !strings.Contains(fmt.Sprint(err), "3 records no key reads") {
		t.Fatalf("Rekey without the old key: %d, %v", n, err)
	}
	v.Close()

	// Rotation: the new key first, the old one after it.
	v = open([]*Key{newKey, oldKey}, Options{})
	before, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatalf("Get with both keys: %v", err)
	}
	if err := v.Put(ctx, sampleGrant("alice", "chat")); err != nil { // written to the new key
		t.Fatal(err)
	}
	if n, err := v.Rekey(ctx); n != 3 || err != nil {
		t.Fatalf("Rekey: %d, %v; want 3 rewritten", n, err)
	}
	if n, err := v.Rekey(ctx); n != 0 || err != nil {
		t.Fatalf("second Rekey: %d, %v; want nothing left", n, err)
	}
	v.Close()

	v = open([]*Key{newKey}, Options{})
	after, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatalf("Get with the new key alone after Rekey: %v", err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("Rekey changed the grant:\n%#v\n%#v", before, after)
	}
	if infos, err := v.List(ctx, "alice"); err != nil || len(infos) != 4 {
		t.Fatalf("List: %v %v", infos, err)
	}
}

// TestRekeyLeavesUnreadable: Rekey re-encrypts every record it can and reports, without
// touching them, the ones no key reads.
func TestRekeyLeavesUnreadable(t *testing.T) { eachBackend(t, testRekeyLeavesUnreadable) }

func testRekeyLeavesUnreadable(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	oldKey, _ := writeKey(t, dir, "old.key")
	newKey, _ := writeKey(t, dir, "new.key")
	v := open([]*Key{oldKey}, Options{})
	for _, p := range []string{"alice", "bob", "carol"} {
		if err := v.Put(ctx, sampleGrant(p, "files")); err != nil {
			t.Fatal(err)
		}
	}
	broken := raw(t, v, "bob", "files")
	broken[len(broken)-1] ^= 1
	setRaw(t, v, "bob", "files", broken)
	setRaw(t, v, "carol", "files", raw(t, v, "alice", "files"))
	v.Close()

	v = open([]*Key{newKey, oldKey}, Options{})
	n, err := v.Rekey(ctx)
	if n != 1 || !errors.Is(err, ErrTampered) || !errors.Is(err, ErrForeign) {
		t.Fatalf("Rekey: %d, %v; want 1 rewritten and bob's and carol's records reported", n, err)
	}
	if got := raw(t, v, "bob", "files"); string(got) != string(broken) {
		t.Fatal("Rekey rewrote a record it could not read")
	}
	v.Close()
	v = open([]*Key{newKey}, Options{})
	if _, err := v.Get(ctx, "alice", "files"); err != nil {
		t.Fatalf("alice after Rekey, new key alone: %v", err)
	}
}

// TestMaxPerPrincipal: a principal holds at most MaxPerPrincipal grants; at the bound it can
// still replace one, and revoking one makes room; other principals are not counted.
func TestMaxPerPrincipal(t *testing.T) { eachBackend(t, testMaxPerPrincipal) }

func testMaxPerPrincipal(t *testing.T, open opener) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	v := open([]*Key{k}, Options{MaxPerPrincipal: 3})

	steps := []struct {
		op                string // put or revoke
		principal, server string
		want              error
	}{
		{"put", "alice", "a", nil},
		{"put", "alice", "b", nil},
		{"put", "alice", "c", nil},
		{"put", "alice", "d", ErrTooMany},
		{"put", "alice", "b", nil},            // a replacement
		{"put", "alice\x7f", "d", ErrInvalid}, // DEL is a control character too
		{"put", "alicex", "d", nil},           // a principal whose name extends alice's is another
		{"put", "bob", "d", nil},
		{"revoke", "alice", "a", nil},
		{"put", "alice", "d", nil},
		{"put", "alice", "e", ErrTooMany},
	}
	for i, s := range steps {
		var err error
		if s.op == "put" {
			err = v.Put(ctx, sampleGrant(s.principal, s.server))
		} else {
			err = v.Revoke(ctx, s.principal, s.server)
		}
		if (s.want == nil) != (err == nil) || (s.want != nil && !errors.Is(err, s.want)) {
			t.Fatalf("step %d, %s %q %q: %v, want %v", i, s.op, s.principal, s.server, err, s.want)
		}
	}
	infos, err := v.List(ctx, "alice")
	if err != nil || len(infos) != 3 {
		t.Fatalf("List: %v %v", infos, err)
	}

	// Concurrent puts of new servers: the bound holds under the group commit.
	ctx2 := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() { errs[i] = v.Put(ctx2, sampleGrant("carol", fmt.Sprint("s", i))) })
	}
	wg.Wait()
	ok, tooMany := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrTooMany):
			tooMany++
		default:
			t.Fatal(err)
		}
	}
	if ok != 3 || tooMany != 7 {
		t.Fatalf("concurrent puts: %d stored, %d refused; want 3 and 7", ok, tooMany)
	}
}

// TestClosed: every call after Close is ErrClosed, and the grants stay for the next vault
// opened over the same records.
func TestClosed(t *testing.T) { eachBackend(t, testClosed) }

func testClosed(t *testing.T, open opener) {
	ctx := context.Background()
	k, _ := writeKey(t, t.TempDir(), "vault.key")
	v := open([]*Key{k}, Options{})
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	g, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return v.Put(ctx, sampleGrant("alice", "files")) }},
		{"PutIfUnchanged", func() error { return v.PutIfUnchanged(ctx, g, g) }},
		{"Get", func() error { _, err := v.Get(ctx, "alice", "files"); return err }},
		{"Revoke", func() error { return v.Revoke(ctx, "alice", "files") }},
		{"RevokeIfUnchanged", func() error { return v.RevokeIfUnchanged(ctx, g) }},
		{"List", func() error { _, err := v.List(ctx, "alice"); return err }},
		{"Rekey", func() error { _, err := v.Rekey(ctx); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: %v, want ErrClosed", c.name, err)
		}
	}
	if got, err := open([]*Key{k}, Options{}).Get(ctx, "alice", "files"); err != nil || !got.same(g) {
		t.Fatalf("the grant in a vault opened again: %v %v", got, err)
	}
}

// TestSharedFile: a vault on a store.DB its owner opened leaves the file open when it closes;
// Open, New and NewEtcd refuse no key and a key not loaded.
func TestSharedFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	db, err := store.Open(filepath.Join(dir, "executor.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	v, err := New(db, []*Key{k}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	// The shared file is still open, and a new vault on it reads the grant.
	v2, err := New(db, []*Key{k}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Get(ctx, "alice", "files"); err != nil {
		t.Fatalf("a new vault on the shared file: %v", err)
	}

	for _, keys := range [][]*Key{nil, {}, {nil}, {k, {}}} {
		if _, err := Open(filepath.Join(dir, "other.db"), keys, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open with keys %v: %v, want ErrInvalid", keys, err)
		}
		if _, err := New(db, keys, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New with keys %v: %v, want ErrInvalid", keys, err)
		}
		if _, err := NewEtcd(ctx, EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}}, keys, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewEtcd with keys %v: %v, want ErrInvalid", keys, err)
		}
	}
}

// TestCanceled: a context already done stops each call before it reads or writes.
func TestCanceled(t *testing.T) { eachBackend(t, testCanceled) }

func testCanceled(t *testing.T, open opener) {
	dir := t.TempDir()
	k, _ := writeKey(t, dir, "vault.key")
	v := open([]*Key{k}, Options{})
	if err := v.Put(context.Background(), sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	g, err := v.Get(context.Background(), "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := v.PutIfUnchanged(ctx, g, g); !errors.Is(err, context.Canceled) {
		t.Errorf("PutIfUnchanged: %v", err)
	}
	if err := v.RevokeIfUnchanged(ctx, g); !errors.Is(err, context.Canceled) {
		t.Errorf("RevokeIfUnchanged: %v", err)
	}
	if err := v.Put(ctx, sampleGrant("alice", "mail")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put: %v", err)
	}
	if _, err := v.Get(ctx, "alice", "files"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if err := v.Revoke(ctx, "alice", "files"); !errors.Is(err, context.Canceled) {
		t.Errorf("Revoke: %v", err)
	}
	if _, err := v.List(ctx, "alice"); !errors.Is(err, context.Canceled) {
		t.Errorf("List: %v", err)
	}
	if _, err := v.Rekey(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Rekey: %v", err)
	}
	if _, err := v.Get(context.Background(), "alice", "files"); err != nil {
		t.Fatalf("the grant after canceled calls: %v", err)
	}
}
