package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/upstream"
)

func TestNonceStoreConfig(t *testing.T) {
	cases := []struct {
		name string
		ns   NonceStore
		want string // "" = valid
	}{
		{"default", NonceStore{}, ""},
		{"bbolt", NonceStore{Kind: "bbolt"}, ""},
		{"etcd", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://127.0.0.1:2379"}}}, ""},
		{"etcd with everything", NonceStore{Kind: "etcd", Config: etcdx.Config{
			Endpoints: []string{"https://a:2379", "https://b:2379"}, Prefix: "/prod/",
			TLS:      &EtcdTLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem", ServerName: "etcd"},
			Username: "executor", PasswordFile: "pw", DialTimeout: confxDuration(time.Second), RequestTimeout: confxDuration(time.Second),
		}}, ""},
		{"unknown kind", NonceStore{Kind: "redis"}, "want bbolt or etcd"},
		{"misspelt kind keeps its endpoints", NonceStore{Kind: "", Config: etcdx.Config{Endpoints: []string{"http://a:2379"}}}, "only to kind etcd"},
		{"bbolt with a prefix", NonceStore{Kind: "bbolt", Config: etcdx.Config{Prefix: "/x/"}}, "only to kind etcd"},
		{"bbolt with a timeout", NonceStore{Kind: "bbolt", Config: etcdx.Config{RequestTimeout: confxDuration(time.Second)}}, "only to kind etcd"},
		{"etcd without endpoints", NonceStore{Kind: "etcd"}, "at least one endpoint"},
		{"etcd bare host:port", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"127.0.0.1:2379"}}}, "http:// or https://"},
		{"etcd mixed schemes", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"https://a:2379", "http://b:2379"}}}, "mix"},
		{"etcd tls over http", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:2379"}, TLS: &EtcdTLS{CA: "ca.pem"}}}, "https://"},
		{"etcd cert without key", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"https://a:2379"}, TLS: &EtcdTLS{Cert: "c.pem"}}}, "cert and key"},
		{"etcd user without password", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:2379"}, Username: "u"}}, "password_file"},
		{"etcd password without user", NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://a:2379"}, PasswordFile: "pw"}}, "password_file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := errorsOf(tc.ns.validate())
			switch {
			case tc.want == "" && err != "":
				t.Fatalf("refused: %s", err)
			case tc.want != "" && !strings.Contains(err, tc.want):
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func errorsOf(errs []error) string {
	var s []string
	for _, err := range errs {
		s = append(s, err.Error())
	}
	return strings.Join(s, "; ")
}

// TestNonceStoreConfigFile: the etcd keys are read from YAML under their contract names, and
// a misspelt key stops the load.
func TestNonceStoreConfigFile(t *testing.T) {
	dir := t.TempDir()
	base := `listen: 127.0.0.1:0
data_dir: ` + dir + `
executor_id: executor-bank
trusted_issuers: [{issuer: verdictd, jwks: jwks.json}]
receipt_key: receipt.jwk
servers: {bank: {command: [bank]}}
callers: [{name: gate, token_sha256: "` + strings.Repeat("ab", 32) + `"}]
`
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(base+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := LoadConfig(write("ok.yaml", `nonce_store:
  kind: etcd
  endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379]
  prefix: /prod/verdict/
  tls: {cert: client.pem, key: client-key.pem, ca: ca.pem, server_name: etcd.internal}
  username: executor
  password_file: /run/secrets/etcd
  dial_timeout: 3s
  request_timeout: 750ms
`))
	if err != nil {
		t.Fatal(err)
	}
	ns := cfg.NonceStore
	if ns.Kind != "etcd" || len(ns.Endpoints) != 2 || ns.Prefix != "/prod/verdict/" || ns.TLS == nil ||
		ns.TLS.CA != "ca.pem" || ns.TLS.ServerName != "etcd.internal" || ns.Username != "executor" ||
		ns.PasswordFile != "/run/secrets/etcd" || ns.DialTimeout.D() != 3*time.Second || ns.RequestTimeout.D() != 750*time.Millisecond {
		t.Fatalf("nonce_store read as %+v (tls %+v)", ns, ns.TLS)
	}
	if _, err := LoadConfig(write("typo.yaml", "nonce_store: {kind: etcd, endpoints: [http://a:2379], prefx: /x/}\n")); err == nil {
		t.Fatal("a misspelt nonce_store key was accepted")
	}
}

// etcdEnv reopens e's executor with the etcd nonce store at endpoint.
func etcdEnv(t *testing.T, endpoint string) *env {
	t.Helper()
	e := newEnv(t, envOpts{})
	cfg := e.svc.cfg
	cfg.NonceStore = NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{endpoint}, Prefix: "/test/", RequestTimeout: confxDuration(500 * time.Millisecond)}}
	e.srv.Close()
	if err := e.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.svc = e.open(cfg)
	return e
}

// sibling opens a second executor that shares e's issuer and nonce store but has its own data
// directory and bank server.
func (e *env) sibling() *env {
	e.t.Helper()
	dir := e.t.TempDir()
	s := &env{t: e.t, dir: dir, issuer: e.issuer, bankLog: filepath.Join(dir, "bank.log"), now: e.now}
	cfg := e.svc.cfg
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Servers = map[string]upstream.Config{"bank": {Command: []string{bankCmd.Path(e.t), "--state", filepath.Join(dir, "bank.json"), "--log", s.bankLog}}}
	s.svc = s.open(cfg)
	return s
}

// TestEtcdSharedAcrossExecutors: a verdict executed by one executor is refused as replayed by
// another that shares the etcd store, and the refusal is on the second one's record.
func TestEtcdSharedAcrossExecutors(t *testing.T) {
	ep := etcdtest.Start(t)
	a := etcdEnv(t, ep)
	b := a.sibling()
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	tok := a.sign(a.claims(transferArgs))
	if r := a.execute(tok, args); r.Status != 200 || r.Execution["execution_decision"] != "executed" {
		t.Fatalf("first executor: %+v", r)
	}
	if r := b.execute(tok, args); r.Status != 409 || r.Error.Code != "replayed" {
		t.Fatalf("second executor: %+v", r)
	}
	if got := len(a.arrivals("transfer")) + len(b.arrivals("transfer")); got != 1 {
		t.Fatalf("banks saw %d calls, want 1", got)
	}
	recs, err := b.svc.execs.ByVerdict(context.Background(), a.claimsID(tok))
	if err != nil || len(recs) != 1 || recs[0].Decision != api.ExecutionNotExecuted || recs[0].Reason != "replayed" {
		t.Fatalf("second executor's records %+v, %v", recs, err)
	}
	// executor_nonce_entries counts the shared store.
	if n, err := b.svc.nonces.Len(context.Background()); err != nil || n != 1 {
		t.Fatalf("Len = %d, %v", n, err)
	}
}

// TestEtcdDownRefuses: with etcd down the executor answers 503 nonce_store_unavailable,
// records the refusal and calls nothing; once etcd is back the same verdict runs exactly once.
func TestEtcdDownRefuses(t *testing.T) {
	srv := etcdtest.NewServer(t)
	e := etcdEnv(t, srv.Endpoint)
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	done := e.sign(e.claims(transferArgs))
	if r := e.execute(done, args); r.Status != 200 {
		t.Fatalf("before: %+v", r)
	}
	tok := e.sign(e.claims(transferArgs))
	srv.Kill()
	for _, tk := range []string{tok, done} {
		r := e.execute(tk, args)
		if r.Status != 503 || r.Error.Code != nonce.ReasonUnavailable || r.Execution["execution_decision"] != "not_executed" {
			t.Fatalf("with etcd down: %+v", r)
		}
		recs, err := e.svc.execs.ByVerdict(context.Background(), e.claimsID(tk))
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, x := range recs {
			if x.Decision == api.ExecutionNotExecuted && x.Reason == nonce.ReasonUnavailable {
				refused++
			}
		}
		if refused != 1 {
			t.Fatalf("%d nonce_store_unavailable refusals on record, want 1", refused)
		}
	}
	if got := e.arrivals("transfer"); len(got) != 1 {
		t.Fatalf("bank saw %d calls with etcd down, want only the one before", len(got))
	}
	srv.Restart()
	// The client reconnects on its own; until it has, the answer stays a refusal.
	var r reply
	for range 50 {
		if r = e.execute(tok, args); r.Status != 503 {
			break
		}
	}
	if r.Status != 200 {
		t.Fatalf("after etcd returned: %+v", r)
	}
	for _, tk := range []string{tok, done} {
		if r := e.execute(tk, args); r.Status != 409 {
			t.Fatalf("replay after etcd returned: %+v", r)
		}
	}
	if got := e.arrivals("transfer"); len(got) != 2 {
		t.Fatalf("bank saw %d calls, want 2", len(got))
	}
}

// TestEtcdPasswordFile: a password file that cannot be read stops the executor at start.
func TestEtcdPasswordFile(t *testing.T) {
	e := newEnv(t, envOpts{})
	cfg := e.svc.cfg
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct{ name, file, want string }{
		{"missing", filepath.Join(t.TempDir(), "nope"), "password_file"},
		{"empty", emptyFile(t), "is empty"},
	} {
		cfg.NonceStore = NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{"http://127.0.0.1:1"}, Username: "u", PasswordFile: tc.file}}
		svc, err := New(context.Background(), cfg, Options{})
		if err == nil {
			svc.Close(context.Background())
			t.Fatalf("%s: New succeeded", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v does not mention %q", tc.name, err, tc.want)
		}
	}
}

func emptyFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEtcdMultiAudienceRunsOnce: with the shared store, a verdict naming two executors is
// accepted by either and runs once across both.
func TestEtcdMultiAudienceRunsOnce(t *testing.T) {
	ep := etcdtest.Start(t)
	a := etcdEnv(t, ep)
	dir := t.TempDir()
	b := &env{t: t, dir: dir, issuer: a.issuer, bankLog: filepath.Join(dir, "bank.log"), now: a.now}
	cfg := a.svc.cfg
	cfg.ExecutorID = "executor-bank-2"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Servers = map[string]upstream.Config{"bank": {Command: []string{bankCmd.Path(t), "--state", filepath.Join(dir, "bank.json"), "--log", b.bankLog}}}
	b.svc = b.open(cfg)
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	c := a.claims(transferArgs)
	c.Audience = []string{execID, "executor-bank-2"}
	tok := a.sign(c)
	if r := b.execute(tok, args); r.Status != 200 {
		t.Fatalf("second executor: %+v", r)
	}
	if r := a.execute(tok, args); r.Status != 409 || r.Error.Code != "replayed" {
		t.Fatalf("first executor: %+v", r)
	}
	if got := len(a.arrivals("transfer")) + len(b.arrivals("transfer")); got != 1 {
		t.Fatalf("banks saw %d calls, want 1", got)
	}
}

// etcdRangeRequests is the number of Range requests the etcd at endpoint has started, from its
// own /metrics: the nonce count is the executor's only Range (a consume is a Txn).
func etcdRangeRequests(t *testing.T, endpoint string) float64 {
	t.Helper()
	v, err := readSample(endpoint+"/metrics", func(name string) bool {
		return strings.HasPrefix(name, "grpc_server_started_total{") &&
			strings.Contains(name, `grpc_method="Range"`) && strings.Contains(name, `grpc_service="etcdserverpb.KV"`)
	})
	if err != nil {
		t.Fatalf("etcd's Range request count: %v", err)
	}
	return v
}

// TestEtcdNonceEntriesCountedOncePerInterval: /metrics needs no token, so scrapes must not be
// able to make the executor read etcd at will. However many scrapes come, the shared store is
// counted at most once per nonceCountInterval (by the executor's clock); between counts the
// gauge shows the last one.
func TestEtcdNonceEntriesCountedOncePerInterval(t *testing.T) {
	ep := etcdtest.Start(t)
	e := etcdEnv(t, ep)
	e.executeN(1)
	before := etcdRangeRequests(t, ep)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if got, err := nonceEntries(e.srv.URL); err != nil || got != 1 {
					t.Errorf("executor_nonce_entries %v, %v; want 1", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := etcdRangeRequests(t, ep) - before; got != 1 {
		t.Fatalf("100 scrapes made %v Range requests to etcd, want 1", got)
	}

	// A verdict consumed within the interval shows once the interval has passed.
	e.executeN(1)
	if got := scrapeNonceEntries(t, e.srv.URL); got != 1 {
		t.Fatalf("executor_nonce_entries %v within the interval, want the cached 1", got)
	}
	e.now = e.now.Add(nonceCountInterval)
	for range 20 {
		if got := scrapeNonceEntries(t, e.srv.URL); got != 2 {
			t.Fatalf("executor_nonce_entries %v after the interval, want 2", got)
		}
	}
	if got := etcdRangeRequests(t, ep) - before; got != 2 {
		t.Fatalf("%v Range requests to etcd over two intervals, want 2", got)
	}
}
