package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// bankCmd is the examples/bank server every test here runs, built once.
var bankCmd = testbin.New("github.com/verdictgate/verdict/examples/bank")

func TestMain(m *testing.M) {
	code := m.Run()
	bankCmd.Remove()
	opCmd.Remove()
	os.Exit(code)
}

const (
	callerToken = "caller-secret"
	adminToken  = "admin-secret"
	issuerID    = "verdictd-test"
	execID      = "executor-bank"
)

// env is one executor under test with a real bank MCP server behind it.
type env struct {
	t       *testing.T
	dir     string
	svc     *Service
	srv     *httptest.Server
	issuer  *keys.Signer
	bankLog string
	now     time.Time
	logger  *slog.Logger     // the service's; nil discards its log
	clock   func() time.Time // the service's clock; nil reads now
}

type envOpts struct {
	bankArgs    []string
	callTimeout time.Duration
	httpBank    string           // URL of an already running streamable HTTP bank; "" = stdio child
	trustTrace  bool             // the caller is trusted for its trace context
	clock       func() time.Time // the service's clock; nil reads env.now
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, bankLog: filepath.Join(dir, "bank.log"), now: time.Now(), clock: o.clock}
	if _, err := keys.Keygen(filepath.Join(dir, "issuer"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.issuer, err = keys.LoadSigner(filepath.Join(dir, "issuer", keys.PrivateKeyFile)); err != nil {
		t.Fatal(err)
	}
	server := upstream.Config{URL: o.httpBank}
	if o.httpBank == "" {
		server = upstream.Config{Command: append([]string{bankCmd.Path(t), "--state", filepath.Join(dir, "bank.json"), "--log", e.bankLog}, o.bankArgs...)}
	}
	cfg := Config{
		Listen:           "127.0.0.1:0",
		DataDir:          filepath.Join(dir, "data"),
		ExecutorID:       execID,
		TrustedIssuers:   []TrustedIssuer{{Issuer: issuerID, JWKS: filepath.Join(dir, "issuer", "jwks.json")}},
		ReceiptKey:       filepath.Join(dir, "receipt", keys.PrivateKeyFile),
		Servers:          map[string]upstream.Config{"bank": server},
		Callers:          []Caller{{Name: "gate", TokenSHA256: httpx.HashToken(callerToken), TrustTraceContext: o.trustTrace}},
		AdminTokenSHA256: httpx.HashToken(adminToken),
	}
	if o.callTimeout > 0 {
		cfg.CallTimeout = confxDuration(o.callTimeout)
	}
	e.svc = e.open(cfg)
	return e
}

func (e *env) open(cfg Config) *Service {
	e.t.Helper()
	ctx := context.Background()
	clock := e.clock
	if clock == nil {
		clock = func() time.Time { return e.now }
	}
	svc, err := New(ctx, cfg, Options{Now: clock, Logger: e.logger})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := svc.Refresh(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.srv = httptest.NewServer(svc.Handler())
	e.t.Cleanup(func() {
		e.srv.Close()
		svc.Close(context.Background())
	})
	return svc
}

// claims returns valid claims for a transfer with args.
func (e *env) claims(args map[string]any) verdict.Claims {
	e.t.Helper()
	tool, ok := e.svc.catalog.Lookup("bank", "transfer")
	if !ok {
		e.t.Fatal("bank/transfer not in catalog")
	}
	digest, err := canonical.Digest(args)
	if err != nil {
		e.t.Fatal(err)
	}
	jti, _ := verdict.NewID()
	now := e.now.Unix()
	return verdict.Claims{
		Issuer: issuerID, Subject: "u_01", Audience: []string{execID},
		IssuedAt: now, NotBefore: now, Expiry: now + 60, ID: jti,
		Server: "bank", Tool: "transfer", ToolDigest: tool.Digest, Policy: "test.1",
		Arguments: digest, Slots: []verdict.Slot{{ID: "amount", Status: "known", Source: ptr("instruction")}},
		ActionKey: "u_01:send money:bank/transfer", Phase: "at_trigger", Record: "rec_test",
	}
}

func ptr(s string) *string { return &s }

func (e *env) sign(c verdict.Claims) string {
	e.t.Helper()
	tok, err := verdict.Sign(e.issuer, c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

type reply struct {
	Status int
	Error  struct {
		Code, Message string
		ConnectURL    string `json:"connect_url"`
	}
	Execution map[string]any
	Result    map[string]any
	Receipt   string
}

func (e *env) post(body string) reply { return e.postWith(body, nil) }

// postWith posts body to /v1/execute as the test caller, with the headers of header besides.
func (e *env) postWith(body string, header map[string]string) reply {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/execute", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+callerToken)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r reply
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatalf("reply %d %q: %v", resp.StatusCode, b, err)
	}
	r.Status = resp.StatusCode
	return r
}

func (e *env) execute(token string, args string) reply {
	return e.post(fmt.Sprintf(`{"verdict": %q, "arguments": %s}`, token, args))
}

// arrivals returns the raw argument strings the bank logged for tool.
func (e *env) arrivals(tool string) []string {
	f, err := os.Open(e.bankLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct{ Tool, Arguments string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			e.t.Fatal(err)
		}
		if l.Tool == tool {
			out = append(out, l.Arguments)
		}
	}
	return out
}

// waitArrival waits until the bank's log shows a call of tool, and fails the test if none does
// within 20s.
func (e *env) waitArrival(tool string) {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(e.arrivals(tool)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s call reached the bank", tool)
		}
	}
}

// A caller not trusted for tracing does not choose the trace id of its execution record by the
// traceparent it sends (another user's trace, say): with tracing off the record carries none.
// A caller trusted for it (the gateway, which starts each call's trace itself) continues its
// own trace, and the record names it.
func TestExecutionTraceChosenOnlyByATrustedCaller(t *testing.T) {
	const chosen, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, trusted := range []bool{false, true} {
		t.Run(map[bool]string{false: "untrusted", true: "trusted"}[trusted], func(t *testing.T) {
			e := newEnv(t, envOpts{trustTrace: trusted})
			args, _ := json.Marshal(transferArgs)
			r := e.postWith(fmt.Sprintf(`{"verdict": %q, "arguments": %s}`, e.sign(e.claims(transferArgs)), args),
				map[string]string{"traceparent": "00-" + chosen + "-" + parent + "-01"})
			if r.Status != http.StatusOK {
				t.Fatalf("execute: %d %+v", r.Status, r.Error)
			}
			got, _ := r.Execution["trace_id"].(string)
			want := ""
			if trusted {
				want = chosen
			}
			if got != want {
				t.Fatalf("execution record trace_id %q, want %q", got, want)
			}
		})
	}
}

var transferArgs = map[string]any{"from_account": "1102534471", "to_account": "110-222-333", "amount": 1000}

func TestExecuteSendsExactlyTheVerifiedBytes(t *testing.T) {
	t.Run("stdio", func(t *testing.T) { sendsExactlyTheVerifiedBytes(t, newEnv(t, envOpts{})) })
	// Over HTTP the bank speaks 2026-07-28 without a session: the call is made without the MCP
	// library's client (upstream.Client.Call with the definition), and must send the same bytes.
	t.Run("http", func(t *testing.T) {
		bankDir := t.TempDir()
		url, _ := startHTTPBank(t, bankDir, "127.0.0.1:0")
		e := newEnv(t, envOpts{httpBank: url})
		e.bankLog = filepath.Join(bankDir, "bank.log")
		sendsExactlyTheVerifiedBytes(t, e)
	})
}

func sendsExactlyTheVerifiedBytes(t *testing.T, e *env) {
	tok := e.sign(e.claims(transferArgs))
	// Same object, other key order and whitespace: the digest is over the canonical form, and
	// the canonical form is what is sent.
	r := e.execute(tok, `{ "to_account": "110-222-333", "amount": 1000, "from_account": "1102534471" }`)
	if r.Status != 200 || r.Execution["execution_decision"] != "executed" {
		t.Fatalf("got %+v", r)
	}
	want := `{"amount":1000,"from_account":"1102534471","to_account":"110-222-333"}`
	if got := e.arrivals("transfer"); len(got) != 1 || got[0] != want {
		t.Fatalf("bank received %q, want [%q]", got, want)
	}
	rc, err := verdict.VerifyReceipt(r.Receipt, verdict.ReceiptExpectation{
		Issuers: []verdict.TrustedIssuer{{ID: execID, Keys: mustJWKS(t, filepath.Join(e.dir, "receipt", "jwks.json"))}},
		Now:     func() time.Time { return e.now },
	})
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	digest, _ := canonical.Digest(transferArgs)
	if rc.Decision != "executed" || rc.Arguments != digest || rc.ActionKey != "u_01:send money:bank/transfer" {
		t.Fatalf("receipt %+v", rc)
	}
	rec := r.Execution
	for k, v := range map[string]any{"actor": "executor", "executor_id": execID, "principal": "u_01", "server": "bank",
		"tool": "transfer", "arguments_digest": digest, "ref_phase": "at_trigger", "ref_record": "rec_test"} {
		if rec[k] != v {
			t.Errorf("record %s = %v, want %v", k, rec[k], v)
		}
	}
	// The record is durable and readable by the admin only.
	get := func(tok string) int {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/executions/"+rec["record_id"].(string), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get(adminToken) != 200 || get(callerToken) != 401 {
		t.Fatal("record reads must need the admin token")
	}
}

func mustJWKS(t *testing.T, path string) *keys.Set {
	t.Helper()
	s, err := keys.LoadJWKS(context.Background(), path, keys.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEveryReasonCodeThroughTheAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	other, _ := keys.Generate(jose.EdDSA)
	es, _ := keys.Generate(jose.ES256)
	mod := func(f func(*verdict.Claims)) string {
		c := e.claims(transferArgs)
		f(&c)
		return e.sign(c)
	}
	valid := e.sign(e.claims(transferArgs))
	parts := strings.Split(valid, ".")
	rid, _ := verdict.NewID()
	receiptTok, err := verdict.SignReceipt(e.issuer, verdict.Receipt{Issuer: issuerID, ID: rid, ActionKey: "k", Arguments: e.claims(transferArgs).Arguments, Decision: "executed", IssuedAt: e.now.Unix()})
	if err != nil {
		t.Fatal(err)
	}
	signWith := func(s *keys.Signer) string {
		tok, err := verdict.Sign(s, e.claims(transferArgs))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tests := []struct {
		name   string
		token  string
		args   string
		status int
		reason string
	}{
		{"malformed", "not.a.jws", args, 403, "malformed"},
		{"alg_not_allowed", signWith(es), args, 403, "alg_not_allowed"},
		{"typ_mismatch", receiptTok, args, 403, "typ_mismatch"},
		{"unknown_kid", signWith(other), args, 403, "unknown_kid"},
		{"bad_signature", parts[0] + "." + parts[1] + "." + flip(parts[2]), args, 403, "bad_signature"},
		{"issuer_not_trusted", mod(func(c *verdict.Claims) { c.Issuer = "someone-else" }), args, 403, "issuer_not_trusted"},
		{"audience_mismatch", mod(func(c *verdict.Claims) { c.Audience = []string{"executor-other"} }), args, 403, "audience_mismatch"},
		{"expired", mod(func(c *verdict.Claims) { c.IssuedAt -= 120; c.NotBefore -= 120; c.Expiry -= 120 }), args, 403, "expired"},
		{"not_yet_valid", mod(func(c *verdict.Claims) { c.IssuedAt += 60; c.NotBefore += 60; c.Expiry += 60 }), args, 403, "not_yet_valid"},
		{"ttl_too_long", mod(func(c *verdict.Claims) { c.Expiry = c.IssuedAt + 3600 }), args, 403, "ttl_too_long"},
		{"unknown_tool", mod(func(c *verdict.Claims) { c.Tool = "drain_account" }), args, 403, "unknown_tool"},
		{"schema_changed", mod(func(c *verdict.Claims) { c.ToolDigest = "sha256:" + strings.Repeat("0", 64) }), args, 403, "schema_changed"},
		{"arguments_mismatch", valid, `{"from_account":"1102534471","to_account":"999-999-999","amount":1000}`, 403, "arguments_mismatch"},
		{"arguments_mismatch_extra_field", valid, `{"from_account":"1102534471","to_account":"110-222-333","amount":1000,"memo":"x"}`, 403, "arguments_mismatch"},
	}
	// The message says what the code does not: an expired verdict says when it expired, in
	// RFC 3339 UTC, and that a new preflight is needed. The others say their reason.
	exp := time.Unix(e.now.Unix()-60, 0).UTC()
	messages := map[string]string{
		"expired": "verdict refused: expired: the verdict expired at " + exp.Format(time.RFC3339) + " (accepted until " +
			exp.Add(DefaultClockSkew).Format(time.RFC3339) + " with clock_skew 5s); run the preflight again for a new verdict",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.execute(tt.token, tt.args)
			if r.Status != tt.status || r.Error.Code != tt.reason {
				t.Fatalf("got %d %q, want %d %q", r.Status, r.Error.Code, tt.status, tt.reason)
			}
			want, ok := messages[tt.name]
			if !ok {
				want = "verdict refused: " + tt.reason
			}
			if r.Error.Message != want {
				t.Errorf("message %q\nwant    %q", r.Error.Message, want)
			}
			if r.Execution["execution_decision"] != "not_executed" || r.Execution["reason"] != tt.reason {
				t.Fatalf("refusal record %v", r.Execution)
			}
		})
	}
	if got := e.arrivals("transfer"); len(got) != 0 {
		t.Fatalf("refused verdicts reached the tool: %q", got)
	}
	// replayed: the valid verdict runs once, then is refused with 409.
	if r := e.execute(valid, args); r.Status != 200 {
		t.Fatalf("valid verdict: %+v", r)
	}
	if r := e.execute(valid, args); r.Status != 409 || r.Error.Code != "replayed" {
		t.Fatalf("replay: %+v", r)
	}
}

func flip(sig string) string {
	b := []byte(sig)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

func TestBadRequestBodies(t *testing.T) {
	e := newEnv(t, envOpts{})
	tok := e.sign(e.claims(transferArgs))
	tests := []struct {
		body   string
		status int
		code   string
	}{
		{`{"verdict":"` + tok + `","arguments":{"amount":9007199254740993}}`, 400, "number_not_exact"},
		{`{"verdict":"` + tok + `","arguments":{"a":1,"a":2}}`, 400, "duplicate_key"},
		{`{"verdict":"` + tok + `","arguments":[1]}`, 400, "wrong_type"},
		{`{"verdict":"` + tok + `","arguments":{},"extra":1}`, 400, "unknown_field"},
		{`{"verdict":"` + tok + `","arguments":{}`, 400, "invalid_json"},
		{`{"arguments":{}}`, 400, "missing_verdict"},
		{`{"verdict":"` + tok + `","arguments":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, 413, "body_too_large"},
	}
	for _, tt := range tests {
		r := e.post(tt.body)
		if r.Status != tt.status || r.Error.Code != tt.code {
			t.Errorf("%.60s: got %d %q, want %d %q", tt.body, r.Status, r.Error.Code, tt.status, tt.code)
		}
	}
	// No caller token, or a wrong one: 401 saying which, nothing recorded or executed.
	for _, tt := range []struct{ token, message string }{
		{"", "a caller token is required"},
		{"guess", "the caller token is not accepted"},
		{adminToken, "the caller token is not accepted"},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/execute", strings.NewReader(`{}`))
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct{ Code, Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != 401 || err != nil || env.Error.Code != "unauthorized" || env.Error.Message != tt.message {
			t.Errorf("token %q: %d %+v (%v), want 401 %q", tt.token, resp.StatusCode, env, err, tt.message)
		}
	}
	// The verdict was never consumed by any of this.
	if r := e.execute(tok, `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`); r.Status != 200 {
		t.Fatalf("valid after bad bodies: %+v", r)
	}
}

func TestConcurrentSubmissionsExecuteOnce(t *testing.T) {
	e := newEnv(t, envOpts{})
	tok := e.sign(e.claims(transferArgs))
	body := fmt.Sprintf(`{"verdict": %q, "arguments": {"from_account":"1102534471","to_account":"110-222-333","amount":1000}}`, tok)
	const n = 200
	var wg sync.WaitGroup
	statuses := make([]int, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/execute", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+callerToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[200] != 1 || count[409] != n-1 {
		t.Fatalf("statuses %v, want one 200 and %d 409", count, n-1)
	}
	if got := e.arrivals("transfer"); len(got) != 1 {
		t.Fatalf("bank saw %d calls", len(got))
	}
	recs, err := e.svc.execs.ByVerdict(context.Background(), e.claimsID(tok))
	if err != nil {
		t.Fatal(err)
	}
	executed := 0
	for _, r := range recs {
		if r.Decision == api.ExecutionExecuted {
			executed++
		}
	}
	if executed != 1 || len(recs) != n {
		t.Fatalf("%d records, %d executed", len(recs), executed)
	}
}

// claimsID reads the jti of a token the test signed.
func (e *env) claimsID(tok string) string {
	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256})
	if err != nil {
		e.t.Fatal(err)
	}
	var c verdict.Claims
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c); err != nil || c.ID == "" {
		e.t.Fatalf("no claims: %v", err)
	}
	return c.ID
}

func TestHangingUpstreamIsOutcomeUnknownAndNeverRetried(t *testing.T) {
	e := newEnv(t, envOpts{bankArgs: []string{"--hang"}, callTimeout: 300 * time.Millisecond})
	tok := e.sign(e.claims(transferArgs))
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	r := e.execute(tok, args)
	if r.Status != 504 || r.Execution["execution_decision"] != "outcome_unknown" {
		t.Fatalf("got %+v", r)
	}
	if r := e.execute(tok, args); r.Status != 409 {
		t.Fatalf("resubmission: %+v", r)
	}
	// The bank logs a call when it reads it, which a loaded machine may do after the executor
	// gave up on it. Once the executor's server has returned from every request, nothing more
	// can be sent; closing the catalog then ends the bank's input and waits for the bank to
	// exit, by which time it has read, and logged, every call the executor wrote.
	e.srv.Close()
	if err := e.svc.catalog.Close(); err != nil {
		t.Fatalf("closing the bank: %v", err)
	}
	if got := e.arrivals("transfer"); len(got) != 1 {
		t.Fatalf("bank saw %d calls, want exactly 1", len(got))
	}
}

func TestToolErrorIsFailedWithReceipt(t *testing.T) {
	e := newEnv(t, envOpts{})
	args := map[string]any{"from_account": "1102534471", "to_account": "110-222-333", "amount": 999_999_999}
	tok := e.sign(e.claims(args))
	r := e.execute(tok, `{"from_account":"1102534471","to_account":"110-222-333","amount":999999999}`)
	if r.Status != 502 || r.Execution["execution_decision"] != "failed" || r.Execution["reason"] != api.ExecutionReasonToolError || r.Receipt == "" {
		t.Fatalf("got %+v", r)
	}
}

func TestInputRequiredIsFailed(t *testing.T) {
	e := newEnv(t, envOpts{bankArgs: []string{"--input-required"}})
	tok := e.sign(e.claims(transferArgs))
	r := e.execute(tok, `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`)
	if r.Status != 502 || r.Execution["reason"] != api.ReasonUpstreamInputRequired {
		t.Fatalf("got %+v", r)
	}
}

// startHTTPBank runs the bank over streamable HTTP on addr ("127.0.0.1:0" picks a port) and
// returns its MCP endpoint.
func startHTTPBank(t *testing.T, dir, addr string, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	args := append([]string{"--state", filepath.Join(dir, "bank.json"), "--log", filepath.Join(dir, "bank.log"), "--http", addr}, extra...)
	cmd := exec.Command(bankCmd.Path(t), args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
			go io.Copy(io.Discard, stderr)
			return strings.TrimSpace(url), cmd
		}
	}
	t.Fatal("bank did not start")
	return "", nil
}

func TestStreamableHTTPUpstreamAndSchemaChange(t *testing.T) {
	bankDir := t.TempDir()
	url, cmd := startHTTPBank(t, bankDir, "127.0.0.1:0")
	e := newEnv(t, envOpts{httpBank: url})
	e.bankLog = filepath.Join(bankDir, "bank.log")
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	if r := e.execute(e.sign(e.claims(transferArgs)), args); r.Status != 200 {
		t.Fatalf("over HTTP: %+v", r)
	}
	// Sign against today's definition, then the server changes its transfer schema.
	tok := e.sign(e.claims(transferArgs))
	cmd.Process.Kill()
	cmd.Wait()
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	waitFree(t, addr)
	startHTTPBank(t, bankDir, addr, "--schema-variant", "2")
	if err := e.svc.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := e.execute(tok, args); r.Status != 403 || r.Error.Code != "schema_changed" {
		t.Fatalf("after schema change: %+v", r)
	}
	if got := e.arrivals("transfer"); len(got) != 1 {
		t.Fatalf("bank saw %d calls", len(got))
	}
}

func waitFree(t *testing.T, addr string) {
	for range 100 {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s stays busy", addr)
}

func TestRecordsSurviveRestartAndReplayStaysRefused(t *testing.T) {
	e := newEnv(t, envOpts{})
	tok := e.sign(e.claims(transferArgs))
	args := `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`
	if r := e.execute(tok, args); r.Status != 200 {
		t.Fatalf("%+v", r)
	}
	cfg := e.svc.cfg
	e.srv.Close()
	if err := e.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.svc = e.open(cfg)
	if r := e.execute(tok, args); r.Status != 409 || r.Error.Code != "replayed" {
		t.Fatalf("replay after restart: %+v", r)
	}
	// The JSONL export holds both records, and masking hides the verdict token.
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/executions?mask=1", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
	if len(lines) != 2 || bytes.Contains(body, []byte(tok)) {
		t.Fatalf("export: %s", body)
	}
}

func confxDuration(d time.Duration) confx.Duration { return confx.Duration(d) }
