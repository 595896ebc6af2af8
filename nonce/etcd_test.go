package nonce

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/verdict"
)

// newTestEtcd connects a store to endpoint; the store is closed when t ends.
func newTestEtcd(t testing.TB, endpoint string, opts EtcdOptions) *Etcd {
	t.Helper()
	opts.Endpoints = []string{endpoint}
	if opts.RequestTimeout == 0 {
		// Long enough that a slow etcd on a loaded machine is never a failure; a test of an
		// outage sets its own.
		opts.RequestTimeout = 30 * time.Second
	}
	e, err := NewEtcd(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// rawClient is a plain etcd client, to look at what the store wrote.
func rawClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func timeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestEtcdConsume pins the answers of one store, in order, against a fixed clock.
func TestEtcdConsume(t *testing.T) {
	ep := etcdtest.Start(t)
	base := time.Now().Truncate(time.Second)
	c := newClock(base)
	e := newTestEtcd(t, ep, EtcdOptions{Skew: 5 * time.Second, Now: c.now, Owner: "executor-a"})
	ctx := context.Background()
	exp := base.Add(time.Minute)
	steps := []struct {
		name    string
		jti     string
		expires time.Time
		want    error
	}{
		{"first use", "j1", exp, nil},
		{"replay", "j1", exp, ErrReplayed},
		{"replay with another exp is still the same jti", "j1", exp.Add(time.Hour), ErrReplayed},
		{"another jti", "j2", exp, nil},
		{"expired beyond skew", "j3", base.Add(-5 * time.Second), ErrExpired},
		{"within skew", "j4", base.Add(-4 * time.Second), nil},
		{"expired and already used: expiry decides first", "j1", base.Add(-time.Minute), ErrExpired},
		{"empty jti", "", exp, ErrMalformed},
		{"oversized jti", strings.Repeat("x", MaxJTIBytes+1), exp, ErrMalformed},
		{"no expiry", "j5", time.Time{}, ErrMalformed},
	}
	for _, s := range steps {
		err := e.Consume(ctx, s.jti, s.expires)
		if s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
			t.Errorf("%s: Consume = %v, want %v", s.name, err, s.want)
		}
	}
	if err := e.Consume(ctx, "j1", exp); !errors.Is(err, verdict.ErrReplayed) || Reason(err) != ReasonReplayed {
		t.Errorf("replay: %v (reason %q) does not match verdict.ErrReplayed", err, Reason(err))
	}
	if n, err := e.Len(ctx); err != nil || n != 3 {
		t.Errorf("Len = %d, %v; want 3", n, err)
	}
	// The value says who consumed it and when, for an operator.
	resp, err := rawClient(t, ep).Get(timeout(t), e.Key("j1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get j1: %v %v", resp, err)
	}
	if v := string(resp.Kvs[0].Value); !strings.Contains(v, `"by":"executor-a"`) {
		t.Errorf("value %s does not name the owner", v)
	}
	if got, want := e.Key("j1"), DefaultEtcdPrefix+"nonce/j1"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

// TestEtcdConcurrentSameJTI: 200 concurrent attempts at one jti through three stores (three
// executors) → exactly one success, 199 replays, nothing else.
func TestEtcdConcurrentSameJTI(t *testing.T) {
	ep := etcdtest.Start(t)
	stores := []*Etcd{newTestEtcd(t, ep, EtcdOptions{}), newTestEtcd(t, ep, EtcdOptions{}), newTestEtcd(t, ep, EtcdOptions{})}
	exp := time.Now().Add(time.Minute)
	got := tally(t, 200, func(i int) error { return stores[i%3].Consume(context.Background(), "same", exp) })
	if got.ok != 1 || got.replayed != 199 || len(got.other) != 0 {
		t.Fatalf("ok %d, replayed %d, other %v; want 1, 199, none", got.ok, got.replayed, got.other)
	}
}

// TestEtcdConcurrentDistinct: 100 jtis × 20 concurrent attempts each over three stores → 100
// successes and 1,900 replays, one success per jti.
func TestEtcdConcurrentDistinct(t *testing.T) {
	ep := etcdtest.Start(t)
	stores := []*Etcd{newTestEtcd(t, ep, EtcdOptions{}), newTestEtcd(t, ep, EtcdOptions{}), newTestEtcd(t, ep, EtcdOptions{})}
	exp := time.Now().Add(time.Minute)
	var (
		mu     sync.Mutex
		perJTI = map[string]int{}
	)
	got := tally(t, 2000, func(i int) error {
		jti := fmt.Sprintf("jti-%03d", i%100)
		err := stores[(i/100)%3].Consume(context.Background(), jti, exp)
		if err == nil {
			mu.Lock()
			perJTI[jti]++
			mu.Unlock()
		}
		return err
	})
	if got.ok != 100 || got.replayed != 1900 || len(got.other) != 0 {
		t.Fatalf("ok %d, replayed %d, other %v; want 100, 1900, none", got.ok, got.replayed, got.other)
	}
	for jti, n := range perJTI {
		if n != 1 {
			t.Errorf("%s consumed %d times", jti, n)
		}
	}
	if n, err := stores[0].Len(context.Background()); err != nil || n != 100 {
		t.Errorf("Len = %d, %v; want 100", n, err)
	}
}

type counts struct {
	ok, replayed int
	other        []error
}

// tally runs n attempts at once (released together) and counts their answers.
func tally(t *testing.T, n int, attempt func(i int) error) counts {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   counts
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			err := attempt(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got.ok++
			case errors.Is(err, ErrReplayed):
				got.replayed++
			default:
				got.other = append(got.other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return got
}

// TestEtcdReplayAfterReconnect: what one connection consumed, a new connection (a restarted
// executor) and a restarted etcd still refuse.
func TestEtcdReplayAfterReconnect(t *testing.T) {
	srv := etcdtest.NewServer(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	a := newTestEtcd(t, srv.Endpoint, EtcdOptions{})
	if err := a.Consume(ctx, "j", exp); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := newTestEtcd(t, srv.Endpoint, EtcdOptions{})
	if err := b.Consume(ctx, "j", exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("new connection: %v, want replayed", err)
	}
	srv.Stop()
	srv.Restart()
	// The client reconnects by itself; an attempt on the old connection is unavailable.
	var err error
	for range 20 {
		if err = b.Consume(ctx, "j", exp); !errors.Is(err, ErrUnavailable) {
			break
		}
	}
	if !errors.Is(err, ErrReplayed) {
		t.Fatalf("after etcd restart: %v, want replayed", err)
	}
}

// TestEtcdUnavailable: with etcd down, Consume and Len fail closed — on the broken connection,
// or at the latest at the request timeout (the test passes no deadline of its own) — and nothing a failed attempt did blocks the verdict
// once etcd is back — while what was consumed before stays consumed.
func TestEtcdUnavailable(t *testing.T) {
	srv := etcdtest.NewServer(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	e := newTestEtcd(t, srv.Endpoint, EtcdOptions{RequestTimeout: 300 * time.Millisecond})
	if err := e.Consume(ctx, "before", exp); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for _, jti := range []string{"during", "before"} {
		err := e.Consume(ctx, jti, exp)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Backend != "etcd" || !errors.Is(err, ErrUnavailable) || Reason(err) != ReasonUnavailable {
			t.Fatalf("Consume(%s) with etcd down = %v, want an etcd UnavailableError", jti, err)
		}
	}
	if _, err := e.Len(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Len with etcd down = %v, want unavailable", err)
	}
	srv.Restart()
	// The client reconnects by itself; the first attempts may still meet the old connection.
	var err error
	for range 50 {
		if err = e.Consume(ctx, "during", exp); !errors.Is(err, ErrUnavailable) {
			break
		}
	}
	if err != nil {
		t.Fatalf("after restart, Consume(during) = %v, want success", err)
	}
	if err := e.Consume(ctx, "before", exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("after restart, Consume(before) = %v, want replayed", err)
	}
}

// TestEtcdLeaseCoversExpiry: every key's lease outlives its verdict's exp + skew + margin,
// wherever exp falls in its lease bucket.
func TestEtcdLeaseCoversExpiry(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := rawClient(t, ep)
	const skew, margin, bucket = 5 * time.Second, 3 * time.Second, 10 * time.Second
	e := newTestEtcd(t, ep, EtcdOptions{Skew: skew, LeaseMargin: margin, LeaseBucket: bucket})
	now := time.Now()
	for i, after := range []time.Duration{0, time.Second, 9 * time.Second, 10 * time.Second, 59 * time.Second, 10 * time.Minute} {
		exp := now.Add(after).Truncate(time.Second).Add(time.Second)
		jti := fmt.Sprintf("j%d", i)
		if err := e.Consume(context.Background(), jti, exp); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(timeout(t), e.Key(jti))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v", jti, err)
		}
		lease := clientv3.LeaseID(resp.Kvs[0].Lease)
		if lease == clientv3.NoLease {
			t.Fatalf("%s has no lease", jti)
		}
		ttl, err := cli.TimeToLive(timeout(t), lease)
		if err != nil {
			t.Fatal(err)
		}
		// TTL is what remains now, in whole seconds rounded down: the key lives past this.
		lives := time.Now().Add(time.Duration(ttl.TTL) * time.Second)
		if need := exp.Add(skew + margin); lives.Before(need.Add(-time.Second)) {
			t.Errorf("exp %s: key lives until about %s, needs %s", exp.Format(time.TimeOnly), lives.Format(time.TimeOnly), need.Format(time.TimeOnly))
		}
		// And not much longer: at most one bucket more.
		if limit := exp.Add(skew + margin + bucket + 2*time.Second); lives.After(limit) {
			t.Errorf("exp %s: key lives until %s, past %s", exp.Format(time.TimeOnly), lives.Format(time.TimeOnly), limit.Format(time.TimeOnly))
		}
	}
}

// TestEtcdKeysExpire: etcd deletes a consumed key once its lease runs out; the verdict is then
// refused as expired, never consumable again.
func TestEtcdKeysExpire(t *testing.T) {
	ep := etcdtest.Start(t)
	e := newTestEtcd(t, ep, EtcdOptions{Skew: time.Second, LeaseMargin: time.Second, LeaseBucket: time.Second})
	ctx := context.Background()
	exp := time.Now().Add(time.Second)
	if err := e.Consume(ctx, "short", exp); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := e.Len(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("key still present 30s after its lease should have ended")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.Consume(ctx, "short", exp); !errors.Is(err, ErrExpired) {
		t.Fatalf("Consume after the key expired = %v, want expired", err)
	}
}

// TestEtcdLostLease: a lease revoked behind the store's back (an operator, a restored cluster)
// fails the Consume that meets it, closed, and the next one grants a fresh lease.
func TestEtcdLostLease(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := rawClient(t, ep)
	e := newTestEtcd(t, ep, EtcdOptions{})
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	if err := e.Consume(ctx, "a", exp); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(timeout(t), e.Key("a"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get a: %v", err)
	}
	if _, err := cli.Revoke(timeout(t), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if err := e.Consume(ctx, "b", exp); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Consume on a revoked lease = %v, want unavailable", err)
	}
	if err := e.Consume(ctx, "b", exp); err != nil {
		t.Fatalf("Consume after the lost lease = %v, want success", err)
	}
}

// TestEtcdPrefixes: deployments with different prefixes share nothing.
func TestEtcdPrefixes(t *testing.T) {
	ep := etcdtest.Start(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	a := newTestEtcd(t, ep, EtcdOptions{Prefix: "/prod/"})
	b := newTestEtcd(t, ep, EtcdOptions{Prefix: "/staging/"})
	for _, s := range []*Etcd{a, b} {
		if err := s.Consume(ctx, "j", exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Consume(ctx, "k", exp); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Len(ctx); n != 2 {
		t.Errorf("prod Len = %d, want 2", n)
	}
	if n, _ := b.Len(ctx); n != 1 {
		t.Errorf("staging Len = %d, want 1", n)
	}
}

// TestEtcdClosed: a closed store refuses, as unavailable.
func TestEtcdClosed(t *testing.T) {
	ep := etcdtest.Start(t)
	e := newTestEtcd(t, ep, EtcdOptions{})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Consume(context.Background(), "j", time.Now().Add(time.Minute)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Consume after Close = %v, want unavailable", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestEtcdAuth: with etcd's auth enabled, a wrong password is refused at NewEtcd and the right
// one consumes.
func TestEtcdAuth(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := rawClient(t, ep)
	ctx := timeout(t)
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "executor", "exec-pw"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "nonces"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "nonces", "/verdict/", clientv3.GetPrefixRangeEnd("/verdict/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserGrantRole(ctx, "executor", "nonces"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewEtcd(ctx, EtcdOptions{Endpoints: []string{ep}, Username: "executor", Password: "wrong"}); err == nil {
		t.Fatal("NewEtcd with a wrong password succeeded")
	}
	e := newTestEtcd(t, ep, EtcdOptions{Username: "executor", Password: "exec-pw"})
	exp := time.Now().Add(time.Minute)
	if err := e.Consume(context.Background(), "j", exp); err != nil {
		t.Fatal(err)
	}
	if err := e.Consume(context.Background(), "j", exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay = %v", err)
	}
	// Outside its role's prefix the same user is refused, and the refusal is unavailability.
	other := newTestEtcd(t, ep, EtcdOptions{Prefix: "/other/", Username: "executor", Password: "exec-pw"})
	if err := other.Consume(context.Background(), "j", exp); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Consume outside the granted prefix = %v, want unavailable", err)
	}
}

// TestNewEtcdOptions: options that cannot work are refused before any connection.
func TestNewEtcdOptions(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts EtcdOptions
		want string
	}{
		{"no endpoints", EtcdOptions{}, "endpoint"},
		{"user without password", EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}, Username: "u"}, "password"},
		{"password without user", EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}, Password: "p"}, "password"},
		{"cert without key", EtcdOptions{Endpoints: []string{"https://127.0.0.1:1"}, TLS: &EtcdTLS{Cert: "c.pem"}}, "cert and key"},
		{"missing ca file", EtcdOptions{Endpoints: []string{"https://127.0.0.1:1"}, TLS: &EtcdTLS{CA: filepath.Join(dir, "nope.pem")}}, "read ca"},
		{"ca file without a certificate", EtcdOptions{Endpoints: []string{"https://127.0.0.1:1"}, TLS: &EtcdTLS{CA: notPEM}}, "no PEM"},
		{"not a URL", EtcdOptions{Endpoints: []string{"127.0.0.1:2379"}}, "http:// or https://"},
		{"unix socket", EtcdOptions{Endpoints: []string{"unix:///run/etcd.sock"}}, "http:// or https://"},
		{"path", EtcdOptions{Endpoints: []string{"http://127.0.0.1:2379/v3"}}, "nothing else"},
		{"credentials in URL", EtcdOptions{Endpoints: []string{"http://u:p@127.0.0.1:2379"}}, "nothing else"},
		{"mixed schemes", EtcdOptions{Endpoints: []string{"https://a:2379", "http://b:2379"}}, "mix"},
		{"tls over http", EtcdOptions{Endpoints: []string{"http://a:2379"}, TLS: &EtcdTLS{}}, "https://"},
		{"missing key pair", EtcdOptions{Endpoints: []string{"https://127.0.0.1:1"}, TLS: &EtcdTLS{Cert: notPEM, Key: notPEM}}, "key pair"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEtcd(context.Background(), tc.opts)
			if err == nil {
				e.Close()
				t.Fatal("NewEtcd succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestNewEtcdDoesNotWait: an executor can start while etcd is down; it refuses until etcd
// answers.
func TestNewEtcdDoesNotWait(t *testing.T) {
	e, err := NewEtcd(context.Background(), EtcdOptions{Endpoints: []string{"http://127.0.0.1:1"}, RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Consume(context.Background(), "j", time.Now().Add(time.Minute)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Consume with nothing listening = %v, want unavailable", err)
	}
}
