package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

var (
	bankCmd = testbin.New("github.com/verdictgate/verdict/examples/bank")
	opCmd   = testbin.New(testop.Package)
)

func TestMain(m *testing.M) {
	code := m.Run()
	bankCmd.Remove()
	opCmd.Remove()
	os.Exit(code)
}

// The resource the provider's tokens are for, as a bank behind a TLS proxy would be known,
// and its metadata's URL.
const (
	bankResource    = "https://bank.example/mcp"
	bankMetadataURL = "https://bank.example/.well-known/oauth-protected-resource/mcp"
	otherResource   = "https://other.example/mcp"
)

// The users of the provider's authorization-code client and their subjects.
const (
	alice, aliceSub = "test-user@127.0.0.1", "id1"
	bob, bobSub     = "test-user2", "id2"
)

// Their accounts, of the demo ledger.
const (
	aliceAccount = "1102534471"
	bobAccount   = "220-555-010"
	landlord     = "110-222-333"
	utility      = "330-000-001"
)

// httpBank is a bank process serving streamable HTTP.
type httpBank struct {
	url, base  string // its /mcp URL, and that URL's scheme and host
	state, log string
}

// startBank starts the bank on a free loopback port with flags and its own ledger and call
// log, and returns once it listens.
func startBank(t *testing.T, flags ...string) *httpBank {
	t.Helper()
	dir := t.TempDir()
	b := &httpBank{state: filepath.Join(dir, "state.json"), log: filepath.Join(dir, "calls.jsonl")}
	cmd := exec.Command(bankCmd.Path(t), append([]string{"--state", b.state, "--log", b.log, "--http", "127.0.0.1:0"}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The rest of its stderr goes to the test's log until it has exited, and no longer:
	// a line logged after the test ended would fail it.
	var logging sync.WaitGroup
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logging.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "bank: listening on "); ok {
			b.url, b.base = u, strings.TrimSuffix(u, "/mcp")
			logging.Go(func() {
				for sc.Scan() {
					t.Log(sc.Text())
				}
			})
			return b
		}
		t.Log(sc.Text())
	}
	t.Fatalf("bank did not start: %v", cmd.Wait())
	return nil
}

// ledger reads the bank's state file.
func (b *httpBank) ledger(t *testing.T) *State {
	t.Helper()
	raw, err := os.ReadFile(b.state)
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// calls reads the bank's call log.
func (b *httpBank) calls(t *testing.T) []LogEntry {
	t.Helper()
	raw, err := os.ReadFile(b.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []LogEntry
	for line := range bytes.Lines(raw) {
		var e LogEntry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("call log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connect opens an MCP session to the bank with token.
func (b *httpBank) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bank-test", Version: "1"}, nil)
	sess, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   b.url,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// call calls tool and returns its result's text, failing t unless the result's isError is
// wantError.
func call(t *testing.T, sess *mcp.ClientSession, tool string, args map[string]any, wantError bool) (string, map[string]any) {
	t.Helper()
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError != wantError {
		t.Fatalf("%s %v: isError %v (%s), want %v", tool, args, res.IsError, text, wantError)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return text, sc
}

// txIDs returns the transaction IDs a list_transactions result holds, and their actors.
func txIDs(t *testing.T, sc map[string]any) (ids, actors []string) {
	t.Helper()
	raw, _ := json.Marshal(sc["transactions"])
	var txs []Transaction
	if err := json.Unmarshal(raw, &txs); err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		ids = append(ids, tx.ID)
		actors = append(actors, tx.Actor)
	}
	return ids, actors
}

// signedInBank starts the provider and a bank that takes its tokens for bankResource with the
// scope "bank", alice and bob each owning an account.
func signedInBank(t *testing.T) (*testop.OP, *httpBank) {
	op := testop.Start(t, opCmd.Path(t), "-resource", bankResource,
		"-client", "agent:agent-secret", "-client", "other:other-secret="+otherResource)
	b := startBank(t, "--auth-issuer", op.Issuer, "--resource", bankResource, "--scope", "bank",
		"--owner", aliceSub+"="+aliceAccount, "--owner", bobSub+"="+bobAccount)
	return op, b
}

// TestSignInMetadata: the bank publishes its protected resource metadata at the well-known
// path followed by /mcp and bare, naming its resource, its issuer, its scope and the header.
func TestSignInMetadata(t *testing.T) {
	op, b := signedInBank(t)
	want := map[string]any{
		"resource":                 bankResource,
		"authorization_servers":    []any{op.Issuer},
		"scopes_supported":         []any{"bank"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "bank",
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(b.base + path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GET %s: %v, want %v", path, got, want)
		}
	}
}

// TestSignInRefusals: a request to /mcp without a token the bank accepts is refused with the
// Bearer challenge that names the metadata, and never reaches a tool.
func TestSignInRefusals(t *testing.T) {
	op, b := signedInBank(t)
	noScope := op.AuthCode(t, alice)
	tests := []struct {
		name          string
		authorization string // the header; "" sends none
		status        int
		challenge     string
	}{
		{"no token", "", http.StatusUnauthorized,
			`Bearer resource_metadata="` + bankMetadataURL + `"`},
		{"not a token", "Bearer not-a-jwt", http.StatusUnauthorized,
			`Bearer resource_metadata="` + bankMetadataURL + `", error="invalid_token"`},
		{"another scheme", "Basic YWxpY2U6c2VjcmV0", http.StatusUnauthorized,
			`Bearer resource_metadata="` + bankMetadataURL + `", error="invalid_token"`},
		{"aud another resource", "Bearer " + op.ClientCredentials(t, "other", "other-secret", "bank"), http.StatusUnauthorized,
			`Bearer resource_metadata="` + bankMetadataURL + `", error="invalid_token"`},
		{"signature altered", "Bearer " + noScope[:len(noScope)-4] + "AAAA", http.StatusUnauthorized,
			`Bearer resource_metadata="` + bankMetadataURL + `", error="invalid_token"`},
		{"without the scope", "Bearer " + noScope, http.StatusForbidden,
			`Bearer resource_metadata="` + bankMetadataURL + `", error="insufficient_scope", scope="bank"`},
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer",` +
		`"arguments":{"from_account":"` + aliceAccount + `","to_account":"` + landlord + `","amount":1}}}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %s (%s), want %d", resp.Status, msg, tt.status)
			}
			if got := resp.Header.Values("WWW-Authenticate"); len(got) != 1 || got[0] != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
		})
	}
	if calls := b.calls(t); len(calls) != 0 {
		t.Errorf("refused requests reached the tools: %+v", calls)
	}
	if st := b.ledger(t); len(st.Transactions) != 0 {
		t.Errorf("refused requests moved money: %+v", st.Transactions)
	}
}

// TestSignInActors: two users each move money from their own account, and the ledger and
// the call log name each; neither can move money from, or read, the other's account, and
// each reads only the transactions of its own.
func TestSignInActors(t *testing.T) {
	op, b := signedInBank(t)
	as := b.connect(t, op.AuthCode(t, alice, "bank"))
	bs := b.connect(t, op.AuthCode(t, bob, "bank"))
	agent := b.connect(t, op.ClientCredentials(t, "agent", "agent-secret", "bank")) // owns nothing

	call(t, as, "transfer", map[string]any{"from_account": aliceAccount, "to_account": landlord, "amount": 100}, false)
	call(t, bs, "transfer", map[string]any{"from_account": bobAccount, "to_account": landlord, "amount": 200}, false)
	call(t, bs, "schedule_transfer", map[string]any{"from_account": bobAccount, "to_account": utility, "amount": 300,
		"when": "2030-01-01T09:00:00Z"}, false)
	st := b.ledger(t)
	var actors []string
	for _, tx := range st.Transactions {
		actors = append(actors, tx.ID+" "+tx.From+" "+tx.Actor)
	}
	wantActors := []string{"tx_000001 " + aliceAccount + " " + aliceSub, "tx_000002 " + bobAccount + " " + bobSub,
		"tx_000003 " + bobAccount + " " + bobSub}
	if !reflect.DeepEqual(actors, wantActors) {
		t.Fatalf("ledger transactions %q, want %q", actors, wantActors)
	}

	// Another's account, and one that does not exist, are refused alike; nothing moves.
	before, err := os.ReadFile(b.state)
	if err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		sess    *mcp.ClientSession
		tool    string
		args    map[string]any
		account string
	}{
		{as, "transfer", map[string]any{"from_account": bobAccount, "to_account": aliceAccount, "amount": 1}, bobAccount},
		{as, "schedule_transfer", map[string]any{"from_account": bobAccount, "to_account": aliceAccount, "amount": 1,
			"when": "2030-01-01T09:00:00Z"}, bobAccount},
		{bs, "transfer", map[string]any{"from_account": aliceAccount, "to_account": bobAccount, "amount": 1}, aliceAccount},
		{agent, "transfer", map[string]any{"from_account": aliceAccount, "to_account": landlord, "amount": 1}, aliceAccount},
		{as, "get_balance", map[string]any{"account": bobAccount}, bobAccount},
		{as, "get_balance", map[string]any{"account": "999"}, "999"},
		{as, "list_transactions", map[string]any{"account": bobAccount}, bobAccount},
	}
	for _, r := range refusals {
		text, sc := call(t, r.sess, r.tool, r.args, true)
		if !strings.Contains(text, `account "`+r.account+`" is not one of`) || sc != nil {
			t.Errorf("%s %v: %q %v, want the refusal of another's account and no data", r.tool, r.args, text, sc)
		}
		if strings.Contains(text, "499") || strings.Contains(text, "balance") {
			t.Errorf("%s %v: the refusal tells of the account: %q", r.tool, r.args, text)
		}
	}
	if after, _ := os.ReadFile(b.state); !bytes.Equal(after, before) {
		t.Errorf("refused calls changed the ledger:\n%s", after)
	}

	// Each reads its own balance and the transactions of its own account alone.
	if _, sc := call(t, as, "get_balance", map[string]any{"account": aliceAccount}, false); sc["balance"] != float64(2_000_000-100) {
		t.Errorf("alice's balance: %v", sc)
	}
	if ids, _ := txIDs(t, must(call(t, as, "list_transactions", map[string]any{}, false))); !reflect.DeepEqual(ids, []string{"tx_000001"}) {
		t.Errorf("alice lists %v, want tx_000001 alone", ids)
	}
	if ids, _ := txIDs(t, must(call(t, bs, "list_transactions", map[string]any{}, false))); !reflect.DeepEqual(ids, []string{"tx_000003", "tx_000002"}) {
		t.Errorf("bob lists %v, want tx_000003 and tx_000002", ids)
	}
	if ids, _ := txIDs(t, must(call(t, agent, "list_transactions", map[string]any{}, false))); len(ids) != 0 {
		t.Errorf("a subject without accounts lists %v", ids)
	}
	// Money bob sends alice is alice's transaction too, without bob's name on it.
	call(t, bs, "transfer", map[string]any{"from_account": bobAccount, "to_account": aliceAccount, "amount": 50}, false)
	ids, txActors := txIDs(t, must(call(t, as, "list_transactions", map[string]any{"account": aliceAccount}, false)))
	if !reflect.DeepEqual(ids, []string{"tx_000004", "tx_000001"}) || !reflect.DeepEqual(txActors, []string{"", aliceSub}) {
		t.Errorf("alice lists %v by %q, want tx_000004 by no one named and tx_000001 by %s", ids, txActors, aliceSub)
	}
	if _, txActors := txIDs(t, must(call(t, bs, "list_transactions", map[string]any{}, false))); txActors[0] != bobSub {
		t.Errorf("bob's own transfer to alice lists by %q", txActors[0])
	}

	// Every call the tools saw is on the log under the caller's name.
	byActor := map[string]int{}
	for _, c := range b.calls(t) {
		byActor[c.Actor]++
	}
	if want := map[string]int{aliceSub: 9, bobSub: 6, "agent": 2}; !reflect.DeepEqual(byActor, want) {
		t.Errorf("call log lines by actor %v, want %v", byActor, want)
	}
}

func must(_ string, sc map[string]any) map[string]any { return sc }

// TestSignInDefaultResource: without --resource the resource is the bank's own /mcp URL,
// whose metadata the challenge points at, and a token for another resource is refused.
func TestSignInDefaultResource(t *testing.T) {
	op := testop.Start(t, opCmd.Path(t), "-resource", bankResource)
	b := startBank(t, "--auth-issuer", op.Issuer, "--owner", aliceSub+"="+aliceAccount)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+op.AuthCode(t, alice))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mdURL := b.base + "/.well-known/oauth-protected-resource/mcp"
	if want := `Bearer resource_metadata="` + mdURL + `", error="invalid_token"`; resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("a token for %s: %s %q, want 401 %q", bankResource, resp.Status, resp.Header.Get("WWW-Authenticate"), want)
	}
	resp, err = http.Get(mdURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Resource string   `json:"resource"`
		Scopes   []string `json:"scopes_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || md.Resource != b.url || md.Scopes != nil {
		t.Errorf("metadata %+v (%v), want resource %s and no scopes", md, err, b.url)
	}
}

// TestSignInExpiry: the guard checks a token's expiry on the verifier's clock; the token the
// provider issued is let through, with its subject and scopes, until that clock passes its
// exp, and refused after.
func TestSignInExpiry(t *testing.T) {
	op := testop.Start(t, opCmd.Path(t), "-resource", bankResource)
	token := op.AuthCode(t, alice, "bank")
	for _, tt := range []struct {
		name   string
		later  time.Duration
		status int
	}{
		{"fresh", 0, http.StatusOK},
		{"expired", 10 * time.Minute, http.StatusUnauthorized}, // the provider's tokens live five
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := func() time.Time { return time.Now().Add(tt.later) }
			rs, err := newResourceServer(t.Context(), &authFlags{issuer: op.Issuer, resource: bankResource, scopes: scopeFlags{"bank"}},
				"", now, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			var seen *auth.TokenInfo
			h := rs.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = auth.TokenInfoFromContext(r.Context()) }))
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tt.status)
			}
			switch {
			case tt.status == http.StatusOK && (seen == nil || seen.UserID != aliceSub || !strings.Contains(strings.Join(seen.Scopes, " "), "bank")):
				t.Errorf("token info %+v, want sub %s with the scope bank", seen, aliceSub)
			case tt.status != http.StatusOK && !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="invalid_token"`):
				t.Errorf("WWW-Authenticate %q, want invalid_token", rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestSignInDefaultResourceRefused: a listener on all addresses has no URL of its own to be
// the resource, and a plain http URL off loopback is none either.
func TestSignInDefaultResourceRefused(t *testing.T) {
	for endpoint, want := range map[string]string{
		"http://[::]:8790/mcp":      "listening on all addresses",
		"http://0.0.0.0:8790/mcp":   "listening on all addresses",
		"http://192.0.2.1:8790/mcp": "must be an https URL",
	} {
		_, err := newResourceServer(t.Context(), &authFlags{issuer: "http://127.0.0.1:1"}, endpoint, nil, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--resource is required") {
			t.Errorf("%s: %v, want --resource required: %s", endpoint, err, want)
		}
	}
}

// TestSignInFlags: the sign-in flags are refused where they mean nothing or would be unsafe,
// each with what is wrong, before the bank serves anything.
func TestSignInFlags(t *testing.T) {
	const issuer = "http://127.0.0.1:1" // nothing listens: the bank must not get that far
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"stdio", []string{"--auth-issuer", issuer}, 2, "need --http"},
		{"owner without issuer", []string{"--http", "127.0.0.1:0", "--owner", "id1=" + aliceAccount}, 2, "need --auth-issuer"},
		{"resource without issuer", []string{"--http", "127.0.0.1:0", "--resource", bankResource}, 2, "need --auth-issuer"},
		{"plain http issuer", []string{"--http", "127.0.0.1:0", "--auth-issuer", "http://idp.example"}, 2, "--auth-issuer"},
		{"resource with a query", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer, "--resource", bankResource + "?x=1"}, 2, "has a query"},
		{"resource with a fragment", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer, "--resource", bankResource + "#x"}, 2, "--resource"},
		{"owner without account", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer, "--owner", "id1"}, 2, "want SUB=ACCOUNT"},
		{"account of two owners", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer,
			"--owner", "id1=" + aliceAccount, "--owner", "id2=" + aliceAccount}, 2, "already id1's"},
		{"scope with a space", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer, "--scope", "a b"}, 2, "not a scope token"},
		{"account not in the ledger", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer, "--owner", "id1=999"}, 1, `no account "999"`},
		{"issuer not reachable", []string{"--http", "127.0.0.1:0", "--auth-issuer", issuer}, 1, "--auth-issuer " + issuer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bankCmd.Path(t), append([]string{"--state", filepath.Join(t.TempDir(), "state.json")}, tt.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("%v: %v\n%s\nwant exit %d and %q", tt.args, err, stderr.String(), tt.code, tt.want)
			}
			if strings.Contains(stderr.String(), "listening on") {
				t.Errorf("the bank served: %s", stderr.String())
			}
		})
	}
}
