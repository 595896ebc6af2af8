package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/verdict"
)

const (
	corpusDir   = "../testdata/adversarial"
	defaultArgs = `{"amount":1000,"from_account":"1102534471","to_account":"110-222-333"}`
	slowIssuer  = "verdictd-slow"
)

// slowJWKS serves an issuer's key set: the first fetch (the executor's start) at once, every
// later one only after delay, or, with delay 0, only once release is closed.
type slowJWKS struct {
	srv       *httptest.Server
	fetches   atomic.Int64
	waiting   chan struct{} // receives one value per fetch that is being held back
	abandoned chan struct{} // receives one value per held fetch the fetcher gave up on
	release   chan struct{}
}

func newSlowJWKS(t testing.TB, body []byte, delay time.Duration) *slowJWKS {
	s := &slowJWKS{waiting: make(chan struct{}, 64), abandoned: make(chan struct{}, 64), release: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.fetches.Add(1) > 1 {
			select {
			case s.waiting <- struct{}{}:
			default:
			}
			var after <-chan time.Time
			if delay > 0 {
				after = time.After(delay)
			}
			select {
			case <-after:
			case <-s.release:
			case <-r.Context().Done():
				select {
				case s.abandoned <- struct{}{}:
				default:
				}
				return
			}
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(body)
	}))
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { close(s.release) })
		s.srv.Close()
	})
	return s
}

// corpusEnv is a daemon under the corpus and what it takes to fill in the cases.
type corpusEnv struct {
	addr  string
	vars  map[string]string // fixed placeholders
	forge *forge
	// claims returns a valid claims JSON for args.
	claims func(args string) (string, string, error)
}

// TestAdversarialExecutor runs every case of testdata/adversarial/executor against an executor
// process. It trusts a second issuer whose JWKS endpoint answers slowly after the first fetch,
// so every case that makes the executor refetch keys meets a slow key server.
func TestAdversarialExecutor(t *testing.T) {
	cases, err := loadCorpus(filepath.Join(corpusDir, "executor"))
	if err != nil {
		t.Fatal(err)
	}
	c := newExecConfig(t)
	slowKeys := newIssuer(t, c.dir, slowIssuer)
	jwks, err := os.ReadFile(slowKeys.jwks)
	if err != nil {
		t.Fatal(err)
	}
	slow := newSlowJWKS(t, jwks, 2*time.Second)
	c.write(t, map[string]string{"issuer": slowIssuer, "jwks": slow.srv.URL})
	d := startExecutor(t, c)
	tsd := toolDigest(t, c.addr, "bank", "transfer")

	f, err := newForge(c.issuer)
	if err != nil {
		t.Fatal(err)
	}
	f.verdict = func(args string) (string, error) {
		digest, err := canonical.DigestJSON([]byte(args))
		if err != nil {
			return "", fmt.Errorf("case arguments %q: %w", args, err)
		}
		return verdict.Sign(c.issuer.signer, c.issuer.claims(t, tsd, digest))
	}
	env := &corpusEnv{
		addr:  c.addr,
		forge: f,
		vars: map[string]string{
			"kid": c.issuer.kid(), "iss": issuerID, "aud": executorID, "tsd": tsd,
			"slow_iss": slowIssuer, "slow_kid": slowKeys.kid(),
		},
		claims: func(args string) (string, string, error) {
			digest, err := canonical.DigestJSON([]byte(args))
			if err != nil {
				return "", "", fmt.Errorf("case arguments %q: %w", args, err)
			}
			cl := c.issuer.claims(t, tsd, digest)
			b, err := json.Marshal(cl)
			return string(b), digest, err
		},
	}
	executed := runCorpus(t, env, cases, "/v1/execute")

	if !d.alive() {
		t.Fatalf("the executor died during the corpus; log:\n%s", tail(filepath.Join(c.dir, "executor.log")))
	}
	if r := newClient(c.addr, "", 5*time.Second).do(context.Background(), http.MethodGet, "/healthz", nil); r.status != http.StatusOK {
		t.Fatalf("/healthz after the corpus: %d %v", r.status, r.err)
	}
	// Only the cases answered 200 reached the tool.
	if n := len(readCallLog(t, c.bankLog)); n != executed {
		t.Errorf("the bank received %d calls; %d cases were answered 200", n, executed)
	}
	t.Logf("%d cases; the slow key server was fetched %d times", len(cases), slow.fetches.Load())
}

// runCorpus sends every case to the daemon at env.addr and returns how many were answered 200.
func runCorpus(t *testing.T, env *corpusEnv, cases []*corpusCase, defaultPath string) int {
	t.Helper()
	ok := 0
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{"conversation": fmt.Sprint("adv-", i)}
			for k, v := range env.vars {
				vars[k] = v
			}
			args := defaultArgs
			if c.args != "" {
				a, err := env.forge.expand(c.args, c, vars)
				if err != nil {
					t.Fatalf("%s:%d: args: %v", c.file, c.line, err)
				}
				args = a
			}
			vars["args"] = args
			if env.claims != nil {
				claims, digest, err := env.claims(args)
				if err != nil {
					t.Fatalf("%s:%d: %v", c.file, c.line, err)
				}
				var cl verdict.Claims
				json.Unmarshal([]byte(claims), &cl)
				vars["claims"], vars["args_digest"], vars["jti"] = claims, digest, cl.ID
				vars["iat"], vars["nbf"], vars["exp"] = fmt.Sprint(cl.IssuedAt), fmt.Sprint(cl.NotBefore), fmt.Sprint(cl.Expiry)
			}
			body, err := env.forge.expand(c.body, c, vars)
			if err != nil {
				t.Fatalf("%s:%d: body: %v", c.file, c.line, err)
			}
			path := c.path
			if path == "" {
				path = defaultPath
			}
			status, code, respBody, err := send(env.addr, c, path, []byte(body))
			if err != nil {
				t.Fatalf("%s:%d: no answer within %s (a hang or a dropped connection): %v", c.file, c.line, c.timeout, err)
			}
			if status >= 500 {
				t.Fatalf("%s:%d: %d %s: %.300s", c.file, c.line, status, code, respBody)
			}
			t.Logf("%s:%d: %d %s", c.file, c.line, status, code)
			var problems []string
			if !c.expect.matches(status, code) {
				problems = append(problems, fmt.Sprintf("got %d %s, want %s", status, code, c.expect))
			}
			if status == http.StatusOK {
				ok++
				problems = append(problems, outcomeProblems(c, respBody)...)
			}
			if len(problems) > 0 {
				t.Errorf("%s:%d: %s: %.300s", c.file, c.line, strings.Join(problems, "; "), respBody)
			}
		})
	}
	return ok
}

func send(addr string, c *corpusCase, path string, body []byte) (int, string, []byte, error) {
	req, err := http.NewRequest(c.method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	switch c.auth {
	case "caller":
		req.Header.Set("Authorization", "Bearer "+callerToken)
	case "admin":
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case "wrong":
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", len(callerToken)))
	}
	if c.contentType != "" && len(body) > 0 {
		req.Header.Set("Content-Type", c.contentType)
	}
	cl := &http.Client{Timeout: c.timeout}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, "", nil, err
	}
	r := response{status: resp.StatusCode, body: buf.Bytes()}
	return r.status, r.errorCode(), r.body, nil
}

// outcomeProblems checks a 200 decision record's outcome against the case's outcome lines.
func outcomeProblems(c *corpusCase, body []byte) []string {
	if len(c.expect.outcomes) == 0 {
		return nil
	}
	var rec struct {
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		return []string{fmt.Sprintf("200 without a JSON record: %v", err)}
	}
	// Negated outcomes must all differ; plain ones are alternatives.
	var problems, oneOf []string
	for _, o := range c.expect.outcomes {
		if neg, ok := strings.CutPrefix(o, "!"); ok {
			if rec.Outcome == neg {
				problems = append(problems, "outcome "+rec.Outcome)
			}
		} else {
			oneOf = append(oneOf, o)
		}
	}
	if len(oneOf) > 0 && !slices.Contains(oneOf, rec.Outcome) {
		problems = append(problems, fmt.Sprintf("outcome %s, want one of %v", rec.Outcome, oneOf))
	}
	return problems
}

// TestAdversarialVerdictd runs every case of testdata/adversarial/verdictd against a verdictd
// process. It accepts receipts from two executors: one whose receipt key the test holds, and
// one whose JWKS endpoint answers slowly after the first fetch.
func TestAdversarialVerdictd(t *testing.T) {
	cases, err := loadCorpus(filepath.Join(corpusDir, "verdictd"))
	if err != nil {
		t.Fatal(err)
	}
	keyDir := t.TempDir()
	receipts := newIssuer(t, keyDir, executorID)
	slowKeys := newIssuer(t, keyDir, "executor-slow")
	jwks, err := os.ReadFile(slowKeys.jwks)
	if err != nil {
		t.Fatal(err)
	}
	slow := newSlowJWKS(t, jwks, 2*time.Second)
	g := newGateConfig(t, inlinePolicy, map[string]any{
		"executors": []map[string]string{
			{"issuer": executorID, "jwks": receipts.jwks},
			{"issuer": "executor-slow", "jwks": slow.srv.URL},
		},
	})
	d := startVerdictd(t, g)

	f, err := newForge(receipts)
	if err != nil {
		t.Fatal(err)
	}
	f.verdict = func(string) (string, error) { return "", fmt.Errorf("{{verdict}} is for executor cases") }
	env := &corpusEnv{
		addr:  g.addr,
		forge: f,
		vars:  map[string]string{"kid": receipts.kid(), "iss": executorID, "iat": fmt.Sprint(time.Now().Unix())},
	}
	runCorpus(t, env, cases, "/v1/preflight")

	if !d.alive() {
		t.Fatalf("verdictd died during the corpus; log:\n%s", tail(filepath.Join(g.dir, "verdictd.log")))
	}
	if r := newClient(g.addr, "", 5*time.Second).do(context.Background(), http.MethodGet, "/healthz", nil); r.status != http.StatusOK {
		t.Fatalf("/healthz after the corpus: %d %v", r.status, r.err)
	}
	t.Logf("%d cases; the slow key server was fetched %d times", len(cases), slow.fetches.Load())
}
