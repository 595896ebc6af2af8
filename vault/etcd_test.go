package vault

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
)

// newEtcdVault opens a vault in the etcd at endpoint under prefix, closed when the test ends.
func newEtcdVault(t testing.TB, endpoint, prefix string, keys []*Key, opts Options, eo EtcdOptions) *Vault {
	t.Helper()
	eo.Endpoints, eo.Prefix = []string{endpoint}, prefix
	v, err := NewEtcd(context.Background(), eo, keys, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// etcdClient is a client of the etcd at endpoint for looking at what the vaults wrote.
func etcdClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestEtcdTwoViews: two vaults over one etcd prefix are two executors' views of the same
// grants: a grant put in one is got in the other, a refresh by one is seen by the other, whose
// own refresh of the grant it read before then is ErrChanged, a revoke in either is seen in
// both, and the bound on a principal's grants holds across them.
func TestEtcdTwoViews(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	k, _ := writeKey(t, t.TempDir(), "vault.key")
	opts := Options{MaxPerPrincipal: 3}
	a := newEtcdVault(t, endpoint, "/prod/", []*Key{k}, opts, EtcdOptions{})
	b := newEtcdVault(t, endpoint, "/prod/", []*Key{k}, opts, EtcdOptions{})

	if err := a.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	atA, err := a.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	atB, err := b.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatalf("the grant put in a, got in b: %v", err)
	}
	if !reflect.DeepEqual(atA, atB) {
		t.Fatalf("a and b read two grants:\n%#v\n%#v", atA, atB)
	}

	// Both read the grant; a refreshes it first, and b's refresh of what it read is refused.
	fromA, fromB := atA, atB
	fromA.AccessToken, fromB.AccessToken = "at-refreshed-by-a", "at-refreshed-by-b"
	if err := a.PutIfUnchanged(ctx, atA, fromA); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfUnchanged(ctx, atB, fromB); !errors.Is(err, ErrChanged) {
		t.Fatalf("b's refresh after a's: %v, want ErrChanged", err)
	}
	if err := b.RevokeIfUnchanged(ctx, atB); !errors.Is(err, ErrChanged) {
		t.Fatalf("b's removal of the grant it read, after a's refresh: %v, want ErrChanged", err)
	}
	if g, err := b.Get(ctx, "alice", "files"); err != nil || g.AccessToken != "at-refreshed-by-a" {
		t.Fatalf("b after a's refresh: %v %v", g, err)
	}

	// The bound counts the grants whichever view added them.
	for i, step := range []struct {
		v      *Vault
		server string
		want   error
	}{{b, "mail", nil}, {a, "chat", nil}, {b, "calendar", ErrTooMany}, {a, "calendar", ErrTooMany}, {b, "files", nil}} {
		if err := step.v.Put(ctx, sampleGrant("alice", step.server)); !errors.Is(err, step.want) {
			t.Fatalf("step %d, put %s: %v, want %v", i, step.server, err, step.want)
		}
	}
	for _, v := range []*Vault{a, b} {
		if infos, err := v.List(ctx, "alice"); err != nil || len(infos) != 3 || infos[0].Server != "chat" || infos[2].Server != "mail" {
			t.Fatalf("List: %+v %v", infos, err)
		}
	}

	// A revoke in b is seen in a.
	if err := b.Revoke(ctx, "alice", "files"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, "alice", "files"); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("a after b's revoke: %v, want ErrNoGrant", err)
	}
	if err := a.Revoke(ctx, "alice", "files"); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("a's revoke after b's: %v, want ErrNoGrant", err)
	}

	// A vault under another prefix is another deployment's: it sees none of them.
	other := newEtcdVault(t, endpoint, "/staging/", []*Key{k}, opts, EtcdOptions{})
	if infos, err := other.List(ctx, "alice"); err != nil || len(infos) != 0 {
		t.Fatalf("another prefix: %+v %v", infos, err)
	}
}

// TestEtcdConcurrentRefresh: views that refresh the grant they all read at once store exactly
// one refresh; every other is ErrChanged, and the stored grant is the one that went in.
// Concurrent adds of new servers stop at the bound.
func TestEtcdConcurrentRefresh(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	k, _ := writeKey(t, t.TempDir(), "vault.key")
	const views = 4
	var vs []*Vault
	for range views {
		vs = append(vs, newEtcdVault(t, endpoint, "/prod/", []*Key{k}, Options{MaxPerPrincipal: 5}, EtcdOptions{}))
	}
	if err := vs[0].Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		read, err := vs[0].Get(ctx, "alice", "files")
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, views)
		var wg sync.WaitGroup
		for i, v := range vs {
			next := read
			next.AccessToken = fmt.Sprintf("at-round-%d-view-%d", round, i)
			wg.Go(func() { errs[i] = v.PutIfUnchanged(ctx, read, next) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Fatalf("round %d: views %d and %d both stored their refresh", round, winner, i)
			case !errors.Is(err, ErrChanged):
				t.Fatalf("round %d, view %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no refresh went in", round)
		}
		if g, err := vs[views-1].Get(ctx, "alice", "files"); err != nil || g.AccessToken != fmt.Sprintf("at-round-%d-view-%d", round, winner) {
			t.Fatalf("round %d: stored %v %v, want view %d's", round, g, err, winner)
		}
	}

	errs := make([]error, 12)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = vs[i%views].Put(ctx, sampleGrant("alice", fmt.Sprint("s", i))) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrTooMany):
			t.Fatal(err)
		}
	}
	if ok != 4 { // alice holds files already
		t.Fatalf("%d of the concurrent adds went in, want 4", ok)
	}
}

// TestEtcdKeyspace: the records are under <prefix>vault/, one key per pair with both names
// escaped, and nothing in the whole keyspace holds a token, a client secret or a subject in
// clear. A key the vault did not write fails the List of its principal and is reported by
// Rekey, never read as a grant.
func TestEtcdKeyspace(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t)
	k, _ := writeKey(t, t.TempDir(), "vault.key")
	v := newEtcdVault(t, endpoint, "/prod/", []*Key{k}, Options{}, EtcdOptions{})
	secrets := map[string]string{}
	for i, p := range []struct{ principal, server string }{{"alice", "files"}, {"https://idp/|a b", "mail/v2"}, {"é%", "ü"}} {
		g := sampleGrant(p.principal, p.server)
		g.AccessToken, g.RefreshToken = fmt.Sprintf("at-%d-secret", i), fmt.Sprintf("rt-%d-secret", i)
		g.ClientID, g.ClientSecret = "client-"+p.server, fmt.Sprintf("cs-%d-secret", i)
		for _, s := range []string{g.AccessToken, g.RefreshToken, g.ClientSecret, g.Subject} {
			secrets[s] = p.principal + " at " + p.server
		}
		if err := v.Put(ctx, g); err != nil {
			t.Fatal(err)
		}
	}

	cli := etcdClient(t, endpoint)
	resp, err := cli.Get(ctx, "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
		for s, whose := range secrets {
			if strings.Contains(string(kv.Key), s) || strings.Contains(string(kv.Value), s) {
				t.Errorf("etcd key %q holds a secret of %s in clear", kv.Key, whose)
			}
		}
		if !strings.HasPrefix(string(kv.Value), "age-encryption.org/v1\n") {
			t.Errorf("etcd key %q: the value is not an age file", kv.Key)
		}
	}
	want := []string{"/prod/vault/%C3%A9%25/%C3%BC", "/prod/vault/alice/files", "/prod/vault/https:%2F%2Fidp%2F%7Ca%20b/mail%2Fv2"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	for _, p := range []struct{ principal, server string }{{"https://idp/|a b", "mail/v2"}, {"é%", "ü"}} {
		if infos, err := v.List(ctx, p.principal); err != nil || len(infos) != 1 || infos[0].Server != p.server {
			t.Fatalf("List %q: %+v %v", p.principal, infos, err)
		}
	}

	// Keys the vault did not write: a name escaped another way, a server with a '/', no server.
	alice := []byte(raw(t, v, "alice", "files"))
	for _, key := range []string{"/prod/vault/%61lice/files", "/prod/vault/alice/x/y", "/prod/vault/bob"} {
		if _, err := cli.Put(ctx, key, string(alice)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.List(ctx, "alice"); !errors.Is(err, ErrTampered) {
		t.Fatalf("List over a key the vault did not write: %v, want ErrTampered", err)
	}
	n, err := v.Rekey(ctx)
	if n != 0 || !errors.Is(err, ErrTampered) || !strings.Contains(fmt.Sprint(err), "3 records no key reads") {
		t.Fatalf("Rekey: %d, %v; want the three keys reported", n, err)
	}
	if g, err := v.Get(ctx, "alice", "files"); err != nil || g.AccessToken != "at-0-secret" {
		t.Fatalf("alice's own grant: %v %v", g, err)
	}
}

// TestEtcdDown: with etcd down every call is ErrUnavailable within the request timeout, and
// none returns a grant; once etcd is back the grant is read again, as it was.
func TestEtcdDown(t *testing.T) {
	ctx := context.Background()
	srv := etcdtest.NewServer(t)
	k, _ := writeKey(t, t.TempDir(), "vault.key")
	v := newEtcdVault(t, srv.Endpoint, "/prod/", []*Key{k}, Options{}, EtcdOptions{RequestTimeout: 300 * time.Millisecond})
	if err := v.Put(ctx, sampleGrant("alice", "files")); err != nil {
		t.Fatal(err)
	}
	before, err := v.Get(ctx, "alice", "files")
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()

	var got Grant
	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() (err error) { got, err = v.Get(ctx, "alice", "files"); return err }},
		{"Put", func() error { return v.Put(ctx, sampleGrant("alice", "mail")) }},
		{"Put over a grant", func() error { return v.Put(ctx, sampleGrant("alice", "files")) }},
		{"PutIfUnchanged", func() error { return v.PutIfUnchanged(ctx, before, before) }},
		{"Revoke", func() error { return v.Revoke(ctx, "alice", "files") }},
		{"RevokeIfUnchanged", func() error { return v.RevokeIfUnchanged(ctx, before) }},
		{"List", func() error { _, err := v.List(ctx, "alice"); return err }},
		{"Rekey", func() error { _, err := v.Rekey(ctx); return err }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with etcd down: %v, want ErrUnavailable", c.name, err)
		}
		if errors.Is(err, ErrNoGrant) || errors.Is(err, ErrTampered) {
			t.Errorf("%s with etcd down reads as a fact about the grant: %v", c.name, err)
		}
	}
	if !reflect.DeepEqual(got, Grant{}) {
		t.Fatalf("Get with etcd down returned a grant: %v", got)
	}

	srv.Restart()
	// The client reconnects on its own; until it has, the answer stays ErrUnavailable.
	for range 50 {
		if got, err = v.Get(ctx, "alice", "files"); !errors.Is(err, ErrUnavailable) {
			break
		}
	}
	if err != nil || !reflect.DeepEqual(got, before) {
		t.Fatalf("after etcd returned: %v %v", got, err)
	}
}

// FuzzEtcdKey: the etcd key of a pair names that pair alone: it parses back to it, two pairs
// share a key only when they are one pair, and a pair's key is under a principal's prefix
// only when it is that principal's.
func FuzzEtcdKey(f *testing.F) {
	for _, s := range [][4]string{
		{"alice", "files", "alice", "files"},
		{"a", "b/c", "a/b", "c"},
		{"a%2F", "x", "a/", "x"},
		{"é", "ü", "%C3%A9", "ü"},
		{"a b", "s", "a+b", "s"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	b := &etcdBackend{keys: "/verdict/vault/"}
	f.Fuzz(func(t *testing.T, p1, s1, p2, s2 string) {
		if checkPair(p1, s1) != nil || checkPair(p2, s2) != nil {
			return
		}
		k1, k2 := b.key(p1, s1), b.key(p2, s2)
		if p, s, err := b.parse(k1); err != nil || p != p1 || s != s1 {
			t.Fatalf("key %q of %q at %q parses as %q at %q, %v", k1, p1, s1, p, s, err)
		}
		if same := p1 == p2 && s1 == s2; (k1 == k2) != same {
			t.Fatalf("%q at %q and %q at %q: keys %q and %q", p1, s1, p2, s2, k1, k2)
		}
		if under := strings.HasPrefix(k1, b.principalPrefix(p2)); under != (p1 == p2) {
			t.Fatalf("key %q of %q is under the prefix of %q: %v", k1, p1, p2, under)
		}
	})
}
