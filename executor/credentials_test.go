package executor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// opCmd is the example OpenID Provider, built on first need.
var opCmd = testbin.New(testop.Package)

// The resources of these tests: the gateway whose users' tokens are the subject tokens, the
// tool server the exchange is asked for, and one the executor's client may not ask for.
const (
	gwResource     = "https://gateway.test/mcp"
	filesResource  = "https://files.test/mcp"
	deniedResource = "https://denied.test/mcp"
)

// resourceServer is an MCP server that is an OAuth protected resource: every request must
// carry an access token the OP issued for filesResource, and its one tool, whoami, answers with
// the subject of the token its request carried.
type resourceServer struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []string // the subject of each whoami call, in order
	tokens map[string]bool
	v      *identity.Verifier
}

func newResourceServer(t *testing.T) *resourceServer {
	t.Helper()
	rs := &resourceServer{tokens: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			sub := req.Extra.TokenInfo.UserID
			rs.mu.Lock()
			rs.calls = append(rs.calls, sub)
			rs.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "subject " + sub}}}, nil
		})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		rs.mu.Lock()
		rs.tokens[token] = true
		v := rs.v
		rs.mu.Unlock()
		p, err := v.Verify(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: p.Subject, Scopes: p.Scopes, Expiration: p.Expiry}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	rs.Server = httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
	t.Cleanup(rs.Close)
	return rs
}

// trust makes the server take the OP's tokens for filesResource.
func (rs *resourceServer) trust(t *testing.T, issuer string) {
	t.Helper()
	v, err := identity.NewVerifier(identity.Config{Issuers: []identity.Issuer{{Issuer: issuer, Audience: filesResource}}})
	if err != nil {
		t.Fatal(err)
	}
	rs.mu.Lock()
	rs.v = v
	rs.mu.Unlock()
}

// whoamis returns the subjects of the tool's calls so far.
func (rs *resourceServer) whoamis() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.calls...)
}

// seen returns every bearer token the server was sent.
func (rs *resourceServer) seen() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []string
	for tok := range rs.tokens {
		out = append(out, tok)
	}
	return out
}

// counter is a proxy in front of the OP's token endpoint that counts the requests it passes:
// each is an exchange. While edit is set, it rewrites the members of each token response, as
// a provider (or someone answering for it) could answer.
type counter struct {
	*httptest.Server
	mu   sync.Mutex
	n    int
	edit func(map[string]any)
}

func newCounter(t *testing.T, target string) *counter {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		c.mu.Lock()
		edit := c.edit
		c.mu.Unlock()
		if edit == nil || resp.StatusCode != http.StatusOK {
			return nil
		}
		var answer map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
			return err
		}
		resp.Body.Close()
		edit(answer)
		b, err := json.Marshal(answer)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counter) rewrite(edit func(map[string]any)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.edit = edit
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// front is a proxy in front of the resource server, as an attacker who controls the server (or
// the network before it) would be: it records the headers of every request it passes, and
// while moving is set it answers every tools/call with a redirect to elsewhere, which records
// whatever reaches it.
type front struct {
	*httptest.Server
	elsewhere *httptest.Server
	mu        sync.Mutex
	moving    bool
	// refusing, when set, is the shared connection's Authorization: every request without it
	// is refused, as by a server that takes none of its users' connections, with an error
	// that quotes the token it was sent.
	refusing string
	headers  []http.Header // of each request passed on
	reached  []http.Header // of each request that reached elsewhere
}

func newFront(t *testing.T, target string) *front {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &front{}
	f.elsewhere = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reached = append(f.reached, r.Header.Clone())
		f.mu.Unlock()
		http.Error(w, "elsewhere", http.StatusInternalServerError)
	}))
	t.Cleanup(f.elsewhere.Close)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a call cut short at the end of a test
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mu.Lock()
		moving := f.moving && bytes.Contains(body, []byte(`"tools/call"`))
		refused := f.refusing != "" && r.Header.Get("Authorization") != f.refusing
		if !moving && !refused {
			f.headers = append(f.headers, r.Header.Clone())
		}
		f.mu.Unlock()
		if refused {
			// A refusal that quotes back the token it was sent, as a hostile server may.
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &req)
			msg, _ := json.Marshal("refused: " + r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":%s}}`, cmp.Or(string(req.ID), "null"), msg)
			return
		}
		if moving {
			http.Redirect(w, r, f.elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// refuseUsers answers 503 to every request that does not carry the shared Authorization, while
// on.
func (f *front) refuseUsers(on bool, shared string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusing = ""
	if on {
		f.refusing = shared
	}
}

func (f *front) move(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moving = on
}

// elsewhereReached returns the headers of the requests that reached elsewhere.
func (f *front) elsewhereReached() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reached)
}

// passed returns the headers of the requests passed on to the resource server.
func (f *front) passed() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.headers)
}

// exchangeEnv is an executor with three servers, all the one resource server: files, called
// with each user's own token (token_exchange), denied, whose exchange the OP refuses, and
// shared, called with the executor's own token as before.
type exchangeEnv struct {
	*env
	op        *testop.OP
	rs        *resourceServer
	front     *front // in front of rs: every server's url
	exchanges *counter
	lister    string // the shared token: a client-credentials token for filesResource
	log       *syncBuffer
	mu        sync.Mutex
	off       time.Duration // the executor's clock is this far ahead
	at        time.Time     // where the executor's clock stands; zero: it runs
}

// clock is the executor's clock: the time now, or where stand set it, moved by off. Expiry is
// tested by moving it.
func (x *exchangeEnv) clock() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.at.IsZero() {
		return x.at.Add(x.off)
	}
	return time.Now().Add(x.off)
}

// stand stops the executor's clock at t, from which off moves it.
func (x *exchangeEnv) stand(t time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.at = t
}

func (x *exchangeEnv) setClock(off time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.off = off
}

// newExchangeEnv starts the environment; edits change the executor's config before it starts.
func newExchangeEnv(t *testing.T, edits ...func(*Config)) *exchangeEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an OpenID Provider")
	}
	rs := newResourceServer(t)
	op := testop.Start(t, opCmd.Path(t), "-resource", gwResource,
		"-client", "lister:lister-secret="+filesResource,
		"-exchange-client", "verdict-executor:exchange-secret="+filesResource)
	rs.trust(t, op.Issuer)
	tokenURL, err := url.Parse(op.Metadata.TokenEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	exchanges := newCounter(t, op.Issuer)
	x := &exchangeEnv{op: op, rs: rs, front: newFront(t, rs.URL), exchanges: exchanges, lister: op.ClientCredentials(t, "lister", "lister-secret"), log: &syncBuffer{}}

	dir := t.TempDir()
	e := &env{t: t, dir: dir, clock: x.clock, logger: slog.New(slog.NewJSONHandler(x.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if _, err := keys.Keygen(filepath.Join(dir, "issuer"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Keygen(filepath.Join(dir, "receipt"), jose.EdDSA); err != nil {
		t.Fatal(err)
	}
	if e.issuer, err = keys.LoadSigner(filepath.Join(dir, "issuer", keys.PrivateKeyFile)); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "idp-secret")
	if err := os.WriteFile(secret, []byte("exchange-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The service identity's headers: its token, and an API key and a cookie beside it, which a
	// user's connection must not send either; and one that is no secret, which it may.
	server := upstream.Config{URL: x.front.URL, Headers: map[string]string{"Authorization": "Bearer " + x.lister,
		"X-Api-Key": "shared-api-key", "Cookie": "session=shared", "X-Client-Version": "7"}}
	exchange := func(audience string) Credential {
		return Credential{Mode: api.CredentialTokenExchange, TokenEndpoint: exchanges.URL + tokenURL.Path, ClientID: "verdict-executor",
			ClientSecretFile: secret, Audience: audience, Resource: audience, SubjectIssuer: op.Issuer,
			HeadersForUsers: []string{"x-client-version"}}
	}
	cfg := Config{
		Listen:           "127.0.0.1:0",
		DataDir:          filepath.Join(dir, "data"),
		ExecutorID:       execID,
		TrustedIssuers:   []TrustedIssuer{{Issuer: issuerID, JWKS: filepath.Join(dir, "issuer", "jwks.json")}},
		ReceiptKey:       filepath.Join(dir, "receipt", keys.PrivateKeyFile),
		Servers:          map[string]upstream.Config{"files": server, "denied": server, "shared": server},
		Credentials:      map[string]Credential{"files": exchange(filesResource), "denied": exchange(deniedResource)},
		Identity:         &identity.Config{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: gwResource}}},
		Callers:          []Caller{{Name: "gate", TokenSHA256: httpx.HashToken(callerToken)}},
		AdminTokenSHA256: httpx.HashToken(adminToken),
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	e.svc = e.open(cfg)
	x.env = e
	return x
}

// verdict signs a verdict for principal's call of server's whoami.
func (x *exchangeEnv) verdict(server, principal string) string {
	x.t.Helper()
	tool, ok := x.svc.catalog.Lookup(server, "whoami")
	if !ok {
		x.t.Fatalf("%s/whoami not in catalog", server)
	}
	digest, err := canonical.Digest(map[string]any{})
	if err != nil {
		x.t.Fatal(err)
	}
	jti, _ := verdict.NewID()
	now := x.clock().Unix()
	return x.sign(verdict.Claims{
		Issuer: issuerID, Subject: principal, Audience: []string{execID},
		IssuedAt: now, NotBefore: now, Expiry: now + 60, ID: jti,
		Server: server, Tool: "whoami", ToolDigest: tool.Digest, Policy: "test.1",
		Arguments: digest, ActionKey: principal + ":whoami:" + server + "/whoami", Phase: "at_trigger", Record: "rec_test",
	})
}

// run presents a verdict with the subject token tok ("" sends none).
func (x *exchangeEnv) run(v, tok string) reply {
	x.t.Helper()
	h := map[string]string{}
	if tok != "" {
		h[identity.SubjectTokenHeader] = tok
	}
	return x.postWith(fmt.Sprintf(`{"verdict": %q, "arguments": {}}`, v), h)
}

// text is the first text content of a reply's result.
func (r reply) text() string {
	content, _ := r.Result["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// TestTokenExchange: a token_exchange server is called with the principal's own token, which
// the identity provider issued in exchange for the user's token that came with the verdict;
// every refusal for the user's credential happens before anything is spent or called; a
// shared server is called as before; and no token appears in the log or the records.
func TestTokenExchange(t *testing.T) {
	x := newExchangeEnv(t)
	alice := x.op.AuthCode(t, "test-user@127.0.0.1") // sub id1
	bob := x.op.AuthCode(t, "test-user2")            // sub id2
	aliceID := identity.PrincipalID(x.op.Issuer, "id1")

	type want struct {
		status     int
		reason     string
		credential string
		subject    string
		text       string
	}
	check := func(t *testing.T, r reply, w want) {
		t.Helper()
		if r.Status != w.status || r.Error.Code != w.reason {
			t.Fatalf("%d %q (%s), want %d %q", r.Status, r.Error.Code, r.Error.Message, w.status, w.reason)
		}
		if got, _ := r.Execution["credential"].(string); got != w.credential {
			t.Errorf("record's credential %q, want %q", got, w.credential)
		}
		if got, _ := r.Execution["credential_subject"].(string); got != w.subject {
			t.Errorf("record's credential_subject %q, want %q", got, w.subject)
		}
		if r.text() != w.text {
			t.Errorf("result %q, want %q", r.text(), w.text)
		}
	}
	// unchanged runs f and fails unless the OP made no exchange and the tool did not run.
	unchanged := func(t *testing.T, f func()) {
		t.Helper()
		ex, calls := x.exchanges.count(), len(x.rs.whoamis())
		f()
		if n := x.exchanges.count() - ex; n != 0 {
			t.Errorf("%d exchanges made", n)
		}
		if got := x.rs.whoamis(); len(got) != calls {
			t.Errorf("the tool ran: %v", got[calls:])
		}
	}

	t.Run("missing, then sent: the same verdict runs", func(t *testing.T) {
		v := x.verdict("files", aliceID)
		unchanged(t, func() {
			r := x.run(v, "")
			check(t, r, want{http.StatusForbidden, api.ExecutionReasonCredentialRequired, api.CredentialTokenExchange, "", ""})
			if !strings.Contains(r.Error.Message, "nothing was spent") {
				t.Errorf("message %q", r.Error.Message)
			}
		})
		check(t, x.run(v, alice), want{http.StatusOK, "", api.CredentialTokenExchange, "id1", "subject id1"})
		if n := x.exchanges.count(); n != 1 {
			t.Errorf("%d exchanges, want 1", n)
		}
	})
	t.Run("the exchanged token is used again", func(t *testing.T) {
		unchanged(t, func() {}) // nothing between the subtests
		ex := x.exchanges.count()
		check(t, x.run(x.verdict("files", aliceID), alice), want{http.StatusOK, "", api.CredentialTokenExchange, "id1", "subject id1"})
		if n := x.exchanges.count() - ex; n != 0 {
			t.Errorf("%d exchanges, want the cached token", n)
		}
	})
	t.Run("another principal, over a connection of its own", func(t *testing.T) {
		// A server may tie a session to the user it was opened for (this one does, in the
		// revisions that have sessions): bob's call takes a connection of bob's.
		check(t, x.run(x.verdict("files", identity.PrincipalID(x.op.Issuer, "id2")), bob), want{http.StatusOK, "", api.CredentialTokenExchange, "id2", "subject id2"})
	})
	t.Run("another principal's token", func(t *testing.T) {
		unchanged(t, func() {
			check(t, x.run(x.verdict("files", aliceID), bob), want{http.StatusForbidden, api.ExecutionReasonCredentialForeign, api.CredentialTokenExchange, "", ""})
		})
	})
	t.Run("not a token", func(t *testing.T) {
		unchanged(t, func() {
			check(t, x.run(x.verdict("files", aliceID), "e30.e30.c2ln"), want{http.StatusForbidden, api.ExecutionReasonCredentialInvalid, api.CredentialTokenExchange, "", ""})
		})
	})
	t.Run("the identity provider refuses the exchange", func(t *testing.T) {
		v := x.verdict("denied", aliceID)
		ex, calls := x.exchanges.count(), len(x.rs.whoamis())
		for range 2 { // not spent: the second presentation is refused alike, not replayed
			check(t, x.run(v, alice), want{http.StatusForbidden, api.ExecutionReasonCredentialExchangeFailed, api.CredentialTokenExchange, "id1", ""})
		}
		if n := x.exchanges.count() - ex; n != 2 {
			t.Errorf("%d exchanges asked for, want 2", n)
		}
		if got := x.rs.whoamis(); len(got) != calls {
			t.Errorf("the tool ran: %v", got[calls:])
		}
	})
	t.Run("a shared server", func(t *testing.T) {
		unchanged(t, func() {}) // nothing between the subtests
		ex := x.exchanges.count()
		// The user's token is ignored there: the gateway sends it with every call.
		check(t, x.run(x.verdict("shared", aliceID), alice), want{http.StatusOK, "", api.CredentialShared, "", "subject lister"})
		check(t, x.run(x.verdict("shared", aliceID), ""), want{http.StatusOK, "", api.CredentialShared, "", "subject lister"})
		if n := x.exchanges.count() - ex; n != 0 {
			t.Errorf("%d exchanges for a shared server", n)
		}
	})
	t.Run("an expired token", func(t *testing.T) {
		// The OP's tokens live five minutes; the executor's clock moves past that and its skew.
		x.setClock(10 * time.Minute)
		defer x.setClock(0)
		unchanged(t, func() {
			r := x.run(x.verdict("files", aliceID), alice)
			check(t, r, want{http.StatusForbidden, api.ExecutionReasonCredentialInvalid, api.CredentialTokenExchange, "", ""})
			if !strings.Contains(r.Error.Message, "(token_expired)") {
				t.Errorf("message %q", r.Error.Message)
			}
		})
	})

	t.Run("never over the shared connection", func(t *testing.T) {
		// A call of a token_exchange server without a principal's credential has no
		// connection to take: the shared one, the list-only identity's, is never it.
		if c, err := x.svc.upstreamFor(t.Context(), "files", callCredential{kind: api.CredentialShared}); err == nil {
			t.Fatalf("a connection for a call without the user's credential: %v", c.ID())
		}
	})
	t.Run("a redirect is not followed", func(t *testing.T) {
		// The server answers the call with a redirect to another origin: a user's connection
		// and the shared one alike take it as the answer, and send nothing there, neither the
		// call nor a token.
		x.front.move(true)
		defer x.front.move(false)
		for _, tc := range []struct{ server, credential, subject string }{
			{"files", api.CredentialTokenExchange, "id1"},
			{"shared", api.CredentialShared, ""},
		} {
			r := x.run(x.verdict(tc.server, aliceID), alice)
			check(t, r, want{http.StatusGatewayTimeout, "", tc.credential, tc.subject, ""})
			if d, _ := r.Execution["execution_decision"].(string); d != string(api.ExecutionOutcomeUnknown) || r.Execution["reason"] != api.ExecutionReasonConnectionLost {
				t.Errorf("%s: %s %v, want outcome_unknown connection_lost", tc.server, d, r.Execution["reason"])
			}
		}
		if got := x.front.elsewhereReached(); len(got) != 0 {
			t.Errorf("%d requests followed the redirect (the first with an Authorization header: %v)", len(got), got[0].Get("Authorization") != "")
		}
	})

	// A user's connection sent the user's token and the one header the entry lets it send:
	// none of the service identity's credentials went with a user's call.
	users := 0
	for _, h := range x.front.passed() {
		if auth := h.Get("Authorization"); auth == "Bearer "+x.lister {
			if h.Get("X-Api-Key") == "" || h.Get("Cookie") == "" {
				t.Errorf("the shared connection lost its headers: %v", h)
			}
			continue
		}
		users++
		if h.Get("X-Api-Key") != "" || h.Get("Cookie") != "" || h.Get("X-Client-Version") != "7" {
			t.Errorf("a user's request carried X-Api-Key %q, Cookie %q, X-Client-Version %q", h.Get("X-Api-Key"), h.Get("Cookie"), h.Get("X-Client-Version"))
		}
	}
	if users == 0 {
		t.Error("no request of a user's connection reached the server")
	}

	// The user's tokens went to the executor, the exchanged ones to the resource server: none
	// of them, and not the shared one, is in the executor's log, its records or its file.
	if got := x.rs.whoamis(); strings.Join(got, ",") != "id1,id1,id2,lister,lister" {
		t.Errorf("the tool ran for %v", got)
	}
	tokens := append([]string{alice, bob, x.lister}, x.rs.seen()...)
	if len(tokens) < 6 {
		t.Fatalf("%d tokens seen, want the exchanged one among them", len(tokens))
	}
	_, export, err := getExport(t, x.srv.URL+"/v1/executions")
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(x.dir, "data", DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"log": []byte(x.log.String()), "records": export, "executor.db": db} {
		for _, tok := range tokens {
			// A JWT's signature alone is as telling as the token.
			sig := tok[strings.LastIndex(tok, ".")+1:]
			if bytes.Contains(b, []byte(sig)) {
				t.Errorf("the %s holds a token", name)
			}
		}
	}
	if !strings.Contains(x.log.String(), `"reason":"credential_exchange_failed"`) || !strings.Contains(x.log.String(), "invalid_target") {
		t.Errorf("the log does not say why the exchange failed:\n%s", x.log)
	}
	for _, reason := range []string{api.ExecutionReasonCredentialRequired, api.ExecutionReasonCredentialForeign, api.ExecutionReasonCredentialInvalid, api.ExecutionReasonCredentialExchangeFailed} {
		if !bytes.Contains(export, []byte(`"reason":"`+reason+`"`)) {
			t.Errorf("no %s record in the export", reason)
		}
	}
	var rec api.ExecutionRecord
	line, _, _ := bytes.Cut(export, []byte("\n"))
	if err := json.Unmarshal(line, &rec); err != nil || rec.Credential != api.CredentialTokenExchange {
		t.Errorf("first record %s: %v", line, err)
	}
}

// TestTokenExchangeOwner: a principal claim that two accounts share (an email, a username;
// client_id here, which the example provider gives every user token of one client) makes one
// principal of them, and the exchange is each account's own (the provider exchanges for the
// token's sub): each account's call carries its own exchanged token, never one the other's
// call left in the cache or on a connection, and the record names the account's sub.
func TestTokenExchangeOwner(t *testing.T) {
	x := newExchangeEnv(t, func(c *Config) { c.Identity.Issuers[0].PrincipalClaim = "client_id" })
	alice := x.op.AuthCode(t, "test-user@127.0.0.1") // sub id1
	bob := x.op.AuthCode(t, "test-user2")            // sub id2
	pa, err := x.svc.subjects.Verify(t.Context(), alice)
	if err != nil {
		t.Fatal(err)
	}
	if pb, err := x.svc.subjects.Verify(t.Context(), bob); err != nil || pb.ID != pa.ID {
		t.Fatalf("bob is %v (%v), want the principal %s too", pb, err, pa.ID)
	}
	for i, tc := range []struct{ token, sub string }{{alice, "id1"}, {bob, "id2"}, {alice, "id1"}} {
		r := x.run(x.verdict("files", pa.ID), tc.token)
		if r.Status != http.StatusOK || r.text() != "subject "+tc.sub {
			t.Fatalf("call %d, of %s: %d %q (%s), want the tool to see %s", i, tc.sub, r.Status, r.text(), r.Error.Message, tc.sub)
		}
		if got, _ := r.Execution["credential_subject"].(string); got != tc.sub {
			t.Errorf("call %d: credential_subject %q, want the token's sub %q", i, got, tc.sub)
		}
	}
	if n := x.exchanges.count(); n != 2 {
		t.Errorf("%d exchanges, want one per account", n)
	}
}

// TestTokenExchangeBeforeNonce: whatever can fail of the user's credential and connection fails
// before the verdict's nonce is consumed, and the same verdict runs once it no longer does: no
// connection free (credential_unavailable), none that can be made (credential_unavailable), an
// exchanged token that would not outlive the call, or whose expires_in says nothing or
// overflows (credential_exchange_failed). A call carries the token it was cleared with, so a
// token dropped from the cache in between does not fail it.
func TestTokenExchangeBeforeNonce(t *testing.T) {
	x := newExchangeEnv(t)
	alice := x.op.AuthCode(t, "test-user@127.0.0.1") // sub id1
	aliceID := identity.PrincipalID(x.op.Issuer, "id1")
	refusedThenRuns := func(t *testing.T, status int, reason string, broken func(), mend func()) {
		t.Helper()
		v := x.verdict("files", aliceID)
		calls := len(x.rs.whoamis())
		broken()
		r := x.run(v, alice)
		mend()
		if r.Status != status || r.Error.Code != reason || !strings.Contains(r.Error.Message, "nothing was spent") {
			t.Fatalf("%d %q (%s), want %d %q", r.Status, r.Error.Code, r.Error.Message, status, reason)
		}
		if d, _ := r.Execution["execution_decision"].(string); d != string(api.ExecutionNotExecuted) || r.Execution["credential_subject"] != "id1" {
			t.Errorf("record %v", r.Execution)
		}
		if got := x.rs.whoamis(); len(got) != calls {
			t.Errorf("the tool ran: %v", got[calls:])
		}
		if r := x.run(v, alice); r.Status != http.StatusOK || r.text() != "subject id1" {
			t.Fatalf("the same verdict again: %d %q (%s)", r.Status, r.Error.Code, r.Error.Message)
		}
	}
	setMax := func(n int) {
		x.svc.userConns.mu.Lock()
		defer x.svc.userConns.mu.Unlock()
		x.svc.userConns.max = n
	}
	dropTokens := func() {
		x.svc.tokens.mu.Lock()
		defer x.svc.tokens.mu.Unlock()
		clear(x.svc.tokens.m)
	}
	closeConns := func() {
		if err := x.svc.userConns.close(); err != nil {
			t.Fatal(err)
		}
		x.svc.userConns.mu.Lock()
		defer x.svc.userConns.mu.Unlock()
		x.svc.userConns.closed = false
	}

	t.Run("every connection in use", func(t *testing.T) {
		refusedThenRuns(t, http.StatusServiceUnavailable, api.ExecutionReasonCredentialUnavailable,
			func() { setMax(0) }, func() { setMax(MaxUserConnections) })
	})
	t.Run("no connection can be made", func(t *testing.T) {
		closeConns()
		refusedThenRuns(t, http.StatusServiceUnavailable, api.ExecutionReasonCredentialUnavailable,
			func() { x.front.refuseUsers(true, "Bearer "+x.lister) }, func() { x.front.refuseUsers(false, "") })
	})
	for _, tc := range []struct {
		name      string
		expiresIn any // nil: left out
	}{
		{"a token that would not outlive the call", 5},
		{"a token that lives exactly the margin", int((DefaultCallTimeout + tokenMargin) / time.Second)},
		{"no expires_in", nil},
		{"an expires_in of zero", 0},
		{"an expires_in that overflows", uint64(1<<64 - 1)},
		{"an expires_in past a year", 400 * 24 * 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedThenRuns(t, http.StatusServiceUnavailable, api.ExecutionReasonCredentialExchangeFailed, func() {
				dropTokens()
				x.exchanges.rewrite(func(answer map[string]any) {
					delete(answer, "expires_in")
					if tc.expiresIn != nil {
						answer["expires_in"] = tc.expiresIn
					}
				})
			}, func() { x.exchanges.rewrite(nil) })
		})
	}
	t.Run("the cache emptied before the call", func(t *testing.T) {
		claims := &verdict.Claims{ID: "v_cleared", Subject: aliceID, Server: "files", Tool: "whoami"}
		cred, refused := x.svc.credential(t.Context(), claims, []string{alice}, "", "", x.clock())
		if refused != nil {
			t.Fatalf("refused: %s", refused.message)
		}
		defer cred.done()
		dropTokens()
		res, err := x.svc.call(t.Context(), "files", "whoami", []byte(`{}`), cred)
		if err != nil || res.IsError {
			t.Fatalf("%v %v", res, err)
		}
	})

	// The server quoted the token it was refused with: the log has it cut out.
	seen := x.rs.seen()
	if len(seen) == 0 {
		t.Fatal("no exchanged token reached the server")
	}
	for _, tok := range seen {
		if strings.Contains(x.log.String(), tok[strings.LastIndex(tok, ".")+1:]) {
			t.Error("the log holds an exchanged token")
		}
	}
	if !strings.Contains(x.log.String(), "refused: Bearer [redacted]") {
		t.Errorf("the log does not say why no connection could be made:\n%s", x.log)
	}
}
