package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/client"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/otlptest"
	"github.com/verdictgate/verdict/internal/testing/testop"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/vault"
)

// The users of the bank, and their accounts: each has an account at the organisation's identity
// provider and at the bank's own authorization server, both example providers, whose users are
// the same.
const (
	aliceUser, bobUser       = "test-user@127.0.0.1", "test-user2"
	aliceSub, bobSub         = "id1", "id2"
	aliceAccount, bobAccount = "1102534471", "220-555-010"
)

// grantBank is the stack of user grants, every part a process: the organisation's identity
// provider (op), where the users sign in to the gateway and to the executor's connect pages;
// the bank as an OAuth protected resource, whose own authorization server (as) the users
// consent at; verdictd; and the executor with its connect pages, its vault and its policy.
type grantBank struct {
	*grantStack
	as *testop.OP
	// service is the catalogs' token at the bank: its authorization server's client "agent",
	// which owns no account, so it lists the tools and moves nothing.
	service string
}

// newGrantBank starts the stack. The bank's resource identifier is its URL, which its
// authorization server must know before the bank, which discovers that server at start, runs:
// the bank's address is chosen first.
func newGrantBank(t *testing.T) *grantBank {
	t.Helper()
	if testing.Short() {
		t.Skip("runs two OpenID Providers, the bank, verdictd, the executor and the gateway")
	}
	buildBins(t)
	bankAddr := freeAddr()
	bankURL := "http://" + bankAddr + "/mcp"
	op := testop.Start(t, opCmd.Path(t), "-resource", gwResource, "-registration")
	as := testop.Start(t, opCmd.Path(t), "-resource", bankURL, "-registration", "-require-resource")
	dir, err := os.MkdirTemp("", "mcpgate-grants-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, bankURL: bankURL, bankLog: filepath.Join(dir, "bank-calls.jsonl")}
	t.Cleanup(s.stop)
	if err := s.start("bank", "--http", bankAddr, "--state", s.path("bank.json"), "--log", s.bankLog,
		"--auth-issuer", as.Issuer, "--resource", bankURL,
		"--owner", aliceSub+"="+aliceAccount, "--owner", bobSub+"="+bobAccount); err != nil {
		t.Fatal(err)
	}
	// The bank serves nothing before it has found its authorization server.
	if err := waitOK("http://"+bankAddr+"/.well-known/oauth-protected-resource/mcp", 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, readFile(s.path("bank.log")))
	}
	b := &grantBank{as: as, service: as.ClientCredentials(t, "agent", "agent-secret")}

	// verdictd lists no server that signs its users in: the policy holds the bank's tools as
	// the catalogs' token lists them, so that the verdicts bind the definitions the executor
	// lists too.
	conn, err := upstream.Dial(ctxT(t), "bank", upstream.Config{URL: bankURL, Headers: b.listOnly()}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := conn.Tools(ctxT(t))
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	for _, tool := range tools {
		raw = append(raw, tool.Raw)
	}
	inline, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const listed = `tools_from: {url: "BANK_URL"}`
	if !bytes.Contains(policy, []byte(listed)) {
		t.Fatalf("testdata/policy.yaml lists the bank otherwise than %s", listed)
	}
	policy = bytes.Replace(policy, []byte(listed), append([]byte("tools: "), inline...), 1)

	key := writeVaultKey(t)
	addr := freeAddr()
	public := "http://" + addr
	s.verdictdConfig = map[string]any{
		"callers": []map[string]any{
			{"name": "gateway", "token_sha256": httpx.HashToken(agentToken), "principals": []string{}},
			{"name": "executor", "token_sha256": httpx.HashToken(execToken), "principals": []string{}}},
		"identity": map[string]any{"issuers": []map[string]any{{"issuer": op.Issuer, "audience": gwResource}}},
	}
	s.executorConfig = map[string]any{
		"listen":   addr,
		"identity": map[string]any{"issuers": []map[string]any{{"issuer": op.Issuer, "audience": gwResource}}},
		"credentials": map[string]any{"bank": map[string]any{"mode": "user_grant", "registration": "dynamic",
			"subject_issuer": op.Issuer, "scopes": []string{"openid", "offline_access"}}},
		"vault": map[string]any{"key_files": []string{key}},
		"connect": map[string]any{"public_url": public,
			"sign_in": map[string]any{"issuer": op.Issuer, "client_id": registerPublicClient(t, op, public+"/connect/signed-in")}},
		// The executor checks a read's class in its own policy: the gateway's.
		"policy": s.path("policy.yaml"),
	}
	if err := s.startGate(policy, map[string]any{"bank": map[string]any{"url": bankURL, "headers": b.listOnly()}}); err != nil {
		t.Fatalf("%v\n%s\n%s", err, readFile(s.path("verdictd.log")), readFile(s.path("executor.log")))
	}
	b.grantStack = &grantStack{idStack: &idStack{stack: s, op: op}, vaultKey: key}
	return b
}

// listOnly is the header the catalogs reach the bank with.
func (b *grantBank) listOnly() map[string]string {
	return map[string]string{"Authorization": "Bearer " + b.service}
}

// gatewayConfig is the gateway's config: the users' stored from_account is each one's own
// account unless from says otherwise (by subject), the bank a user server it lists with the
// catalogs' token.
func (b *grantBank) gatewayConfig(dir string, from map[string]string) map[string]any {
	cfg := b.identityConfig(dir)
	principals := map[string]any{}
	for sub, account := range map[string]string{aliceSub: aliceAccount, bobSub: bobAccount} {
		if a, ok := from[sub]; ok {
			account = a
		}
		principals[identity.PrincipalID(b.op.Issuer, sub)] = map[string]any{"pre_set_data": map[string]any{"from_account": account}}
	}
	cfg["principals"] = principals
	cfg["servers"] = map[string]any{"bank": map[string]any{"url": b.bankURL, "headers": b.listOnly()}}
	cfg["user_servers"] = []string{"bank"}
	return cfg
}

// registerPublicClient registers a public client of the code flow at op (RFC 7591) and returns
// its id.
func registerPublicClient(t *testing.T, op *testop.OP, redirect string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": "executor connect", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code"}, "response_types": []string{"code"}})
	resp, err := http.Post(op.Issuer+"/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ClientID == "" {
		t.Fatalf("register at %s: %d %v %+v", op.Issuer, resp.StatusCode, err, out)
	}
	return out.ClientID
}

// connectPage has user open page in a browser and connect their bank account, signing in at
// the identity provider and at the bank's authorization server as a person would. It is
// called from a host's elicitation handler too, so it reports with Errorf.
func (b *grantBank) connectPage(t *testing.T, user, page string, out *outputs) bool {
	// Every answer of the executor's on the way is what the user's browser was shown: the
	// redirects, and the page the flow ends at. (The providers' own are the issuers'.)
	watch := func(p testop.Page) {
		if strings.HasPrefix(p.URL.String(), b.executor+"/") {
			out.add("the connect pages "+user+"'s browser saw", fmt.Sprintf("%s %d %v\n%s", p.URL, p.Status, p.Header, p.Body))
		}
	}
	p, err := b.op.Browser(user).Also(b.as, user).Watch(watch).Visit(context.Background(), page, "")
	if err != nil {
		t.Errorf("%s at %s: %v", user, page, err)
		return false
	}
	if p.Status != http.StatusOK || !bytes.Contains(p.Body, []byte("Account connected")) {
		t.Errorf("%s: the connect flow ended at %s %d:\n%s", user, p.URL, p.Status, p.Body)
		return false
	}
	return true
}

// openVault opens the executor's vault, which the caller closes. The executor must not run:
// its file is its own while it runs.
func (b *grantBank) openVault(t *testing.T) *vault.Vault {
	t.Helper()
	k, err := vault.LoadKey(b.vaultKey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.Open(b.path("executor-data", executor.DBFile), []*vault.Key{k}, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ledger is the bank's state file as stored: the balances, and the transactions.
type ledger struct {
	Accounts map[string]struct {
		Balance int64 `json:"balance"`
	} `json:"accounts"`
	Transactions []struct {
		From   string `json:"from_account"`
		Amount int64  `json:"amount"`
		Actor  string `json:"actor"`
	} `json:"transactions"`
}

func (b *grantBank) ledger(t *testing.T) ledger {
	t.Helper()
	var l ledger
	if err := json.Unmarshal([]byte(readFile(b.path("bank.json"))), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// fromAccount is the account a transfer the bank was called with moves money from.
func fromAccount(t *testing.T, c bankCall) string {
	t.Helper()
	var args struct {
		From string `json:"from_account"`
	}
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		t.Fatalf("the bank's call log: %v", err)
	}
	return args.From
}

// outputs is what the run showed outside the daemons' stores, by what it is.
type outputs struct {
	mu    sync.Mutex
	names []string
	texts []string
}

func (o *outputs) add(what, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names = append(o.names, what)
	o.texts = append(o.texts, text)
}

func (o *outputs) addJSON(what string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	o.add(what, string(b))
}

// secrets are the tokens and client secrets the run minted, by what each is: no failure
// prints one.
type secrets map[string]string

func (s secrets) addGrant(whose string, g vault.Grant) {
	s[whose+"'s grant's access token"] = g.AccessToken
	s[whose+"'s grant's refresh token"] = g.RefreshToken
	s[whose+"'s grant's client secret"] = g.ClientSecret
}

// TestUserGrantsEndToEnd: two users each connect their own bank account through the executor's
// connect pages, following the link the gateway gave them (a URL elicitation, or a tool
// error's text), and each one's gated transfer runs with that user's own grant, as the bank's
// ledger says; a transfer of one user's that names the other's account moves nothing of the
// other's; each user's reads list that user's own transactions; a grant whose refresh token
// the bank's authorization server revoked, once its access token expired, gives the user the
// connect page again and moves nothing; and no token is in any output of the run: the daemons'
// logs, their records, their spans, what the hosts were sent and what the browsers saw.
func TestUserGrantsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two OpenID Providers, the bank, verdictd, the executor and the gateway")
	}
	spans := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", spans.URL)
	b := newGrantBank(t)
	g := startGateway(t, b.gatewayConfig(t.TempDir(), nil))
	out := &outputs{}
	sec := secrets{"the catalogs' token at the bank": b.service}
	alice, bob := b.op.AuthCode(t, aliceUser), b.op.AuthCode(t, bobUser)
	sec["alice's access token"], sec["bob's access token"] = alice, bob
	aliceID, bobID := identity.PrincipalID(b.op.Issuer, aliceSub), identity.PrincipalID(b.op.Issuer, bobSub)
	page := b.executor + "/connect/bank"
	transfer := func(from string) *mcp.CallToolParams {
		args := modelArgs()
		args["from_account"] = from
		return &mcp.CallToolParams{Name: "bank.transfer", Arguments: args}
	}
	// call makes one call of the host's session, and returns its result and the bank's
	// transfers meanwhile.
	call := func(t *testing.T, who string, sess *mcp.ClientSession, p *mcp.CallToolParams) (*mcp.CallToolResult, []bankCall) {
		t.Helper()
		mark := b.mark(t)
		res, err := sess.CallTool(ctxT(t), p)
		if err != nil {
			t.Fatalf("%s: %s: %v", who, p.Name, err)
		}
		out.addJSON(who+"'s host was given", res)
		return res, only(mustCalls(t, b.stack, mark), "transfer")
	}
	// link is the page a tool error gives.
	link := func(t *testing.T, res *mcp.CallToolResult) string {
		t.Helper()
		_, rest, ok := strings.Cut(text(res), "connect it at ")
		p, _, _ := strings.Cut(rest, ",")
		if !res.IsError || reason(res) != "credential_required" || !ok || p != page {
			t.Fatalf("isError=%v %s %q, want credential_required with the page %s\nexecutor log:\n%s",
				res.IsError, reason(res), text(res), page, readFile(b.path("executor.log")))
		}
		return p
	}
	ranAs := func(t *testing.T, res *mcp.CallToolResult, transfers []bankCall, sub string) {
		t.Helper()
		if res.IsError || len(transfers) != 1 || transfers[0].Actor != sub {
			t.Fatalf("isError=%v %s %q; the bank's transfers %+v, want one by %s\nexecutor log:\n%s",
				res.IsError, reason(res), text(res), transfers, sub, readFile(b.path("executor.log")))
		}
	}

	// Alice's host declared URL elicitation: it is asked to open the connect page, she connects
	// her account there, and the same verdict runs.
	ha := newConnectHost("accept", nil)
	ha.connect = func() {
		urls := ha.shownURLs()
		b.connectPage(t, aliceUser, urls[len(urls)-1].URL, out)
	}
	sa, err := g.connectAs(t, alice, "2025-11-25", ha.options(true))
	if err != nil {
		t.Fatal(err)
	}
	res, transfers := call(t, "alice", sa, transfer(aliceAccount))
	ranAs(t, res, transfers, aliceSub)
	if urls := ha.shownURLs(); len(urls) != 1 || urls[0].URL != page {
		t.Fatalf("alice's host was asked to open %+v, want the page %s once", urls, page)
	}

	// Bob's host did not: the tool error gives him the page, he connects there and asks again.
	hb := newConnectHost("accept", nil)
	sb, err := g.connectAs(t, bob, "2025-11-25", hb.options(false))
	if err != nil {
		t.Fatal(err)
	}
	res, transfers = call(t, "bob", sb, transfer(bobAccount))
	if len(transfers) != 0 {
		t.Fatalf("bank saw %+v before bob connected", transfers)
	}
	if !b.connectPage(t, bobUser, link(t, res), out) {
		t.FailNow()
	}
	res, transfers = call(t, "bob", sb, transfer(bobAccount))
	ranAs(t, res, transfers, bobSub)
	settled := b.ledger(t)

	// The model proposes bob's account to alice's host: her from_account is the one she stored,
	// her own, so the call that runs moves her money, with her token, and never names his.
	res, transfers = call(t, "alice", sa, transfer(bobAccount))
	ranAs(t, res, transfers, aliceSub)
	if from := fromAccount(t, transfers[0]); from != aliceAccount {
		t.Fatalf("alice's call the model made from bob's account reached the bank from %s", from)
	}
	// Even a verdict for alice that names bob's account (her stored from_account is his) reaches
	// the bank with her grant alone, which the bank refuses.
	g2 := startGateway(t, b.gatewayConfig(t.TempDir(), map[string]string{aliceSub: bobAccount}))
	sa2, err := g2.connectAs(t, alice, "2025-11-25", newConnectHost("accept", nil).options(true))
	if err != nil {
		t.Fatal(err)
	}
	res, transfers = call(t, "alice", sa2, transfer(bobAccount))
	if !res.IsError || reason(res) != api.ReasonExecutionFailed || len(transfers) != 1 || transfers[0].Actor != aliceSub || fromAccount(t, transfers[0]) != bobAccount {
		t.Fatalf("a verdict for alice naming bob's account: isError=%v %s %q; the bank's transfers %+v, want one by %s, refused",
			res.IsError, reason(res), text(res), transfers, aliceSub)
	}
	if l := b.ledger(t); l.Accounts[bobAccount] != settled.Accounts[bobAccount] {
		t.Fatalf("bob's account moved when alice's calls named it: %+v, was %+v", l.Accounts[bobAccount], settled.Accounts[bobAccount])
	}

	// Reads run with the reader's own grant: each lists their own transactions only.
	for _, rd := range []struct {
		who      string
		sess     *mcp.ClientSession
		sub, own string
	}{{"alice", sa, aliceSub, aliceAccount}, {"bob", sb, bobSub, bobAccount}} {
		mark := b.mark(t)
		res, err := rd.sess.CallTool(ctxT(t), &mcp.CallToolParams{Name: "bank.list_transactions", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		out.addJSON(rd.who+"'s host was given", res)
		var listed struct {
			Transactions []struct {
				From  string `json:"from_account"`
				Actor string `json:"actor"`
			} `json:"transactions"`
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if res.IsError || json.Unmarshal(sc, &listed) != nil || len(listed.Transactions) == 0 {
			t.Fatalf("%s's read: isError=%v %s %q", rd.who, res.IsError, reason(res), text(res))
		}
		for _, tx := range listed.Transactions {
			if tx.From != rd.own || tx.Actor != rd.sub {
				t.Errorf("%s's read lists %+v, not one of their own", rd.who, tx)
			}
		}
		if reads := only(mustCalls(t, b.stack, mark), "list_transactions"); len(reads) != 1 || reads[0].Actor != rd.sub {
			t.Errorf("%s's read reached the bank as %+v, want once by %s", rd.who, reads, rd.sub)
		}
	}

	// Alice's refresh token revoked at the bank's authorization server, and her access token
	// expired as the executor holds it (rewritten while it is stopped): her next call gives her
	// the page again, the grant is gone, and nothing moves.
	b.restart(t, "executor", b.executor, func() {
		v := b.openVault(t)
		defer v.Close()
		gr, err := v.Get(context.Background(), aliceID, "bank")
		if err != nil {
			t.Fatal(err)
		}
		sec.addGrant("alice", gr)
		if gr.RefreshToken == "" {
			t.Fatal("alice's grant has no refresh token")
		}
		// The grant's own client revokes it: a public one names itself, a confidential one
		// authenticates.
		form := url.Values{"token": {gr.RefreshToken}, "token_type_hint": {"refresh_token"}}
		if gr.ClientSecret == "" {
			form.Set("client_id", gr.ClientID)
		}
		req, err := http.NewRequest(http.MethodPost, b.as.Issuer+"/revoke", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if gr.ClientSecret != "" {
			req.SetBasicAuth(url.QueryEscape(gr.ClientID), url.QueryEscape(gr.ClientSecret))
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("revoke: %v %v", err, resp)
		}
		resp.Body.Close()
		gr.Expiry = time.Now().Add(-time.Second)
		if err := v.Put(context.Background(), gr); err != nil {
			t.Fatal(err)
		}
	})
	before := b.ledger(t)
	hr := newConnectHost("accept", nil)
	sr, err := g.connectAs(t, alice, "2025-11-25", hr.options(false))
	if err != nil {
		t.Fatal(err)
	}
	res, transfers = call(t, "alice", sr, transfer(aliceAccount))
	again := link(t, res)
	if len(transfers) != 0 {
		t.Fatalf("bank saw %+v with a revoked grant", transfers)
	}
	if l := b.ledger(t); fmt.Sprint(l) != fmt.Sprint(before) {
		t.Fatalf("the ledger changed with a revoked grant: %+v, was %+v", l, before)
	}
	admin, err := client.New(b.executor, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	if gs, err := admin.Grants(ctxT(t), aliceID); err != nil || len(gs) != 0 {
		t.Fatalf("alice's grants after the refused refresh: %v %+v", err, gs)
	}
	// She connects again at the page, and her request made again runs.
	if !b.connectPage(t, aliceUser, again, out) {
		t.FailNow()
	}
	res, transfers = call(t, "alice", sr, transfer(aliceAccount))
	ranAs(t, res, transfers, aliceSub)

	// The ledger: each transfer from each account by its owner, and no other.
	actors := map[string][]string{}
	for _, tx := range b.ledger(t).Transactions {
		actors[tx.From] = append(actors[tx.From], tx.Actor)
	}
	want := map[string][]string{aliceAccount: {aliceSub, aliceSub, aliceSub}, bobAccount: {bobSub}}
	if fmt.Sprint(actors) != fmt.Sprint(want) {
		t.Errorf("the ledger's actors by account %v, want %v", actors, want)
	}

	// The records, exported by the admin API.
	records, err := client.New(b.verdictd, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	for what, export := range map[string]func(context.Context, client.Query, func(json.RawMessage) error) (int, error){
		"verdictd's decision records": records.Records, "the executor's execution records": admin.Executions,
	} {
		var lines []string
		if _, err := export(ctxT(t), client.Query{}, func(raw json.RawMessage) error {
			lines = append(lines, string(raw))
			return nil
		}); err != nil || len(lines) == 0 {
			t.Fatalf("%s: %v, %d records", what, err, len(lines))
		}
		out.add(what, strings.Join(lines, "\n"))
	}

	// Everything stops, and so has written all it will: the logs, and the spans each daemon
	// sends as it stops. The vault holds the grants as they are now.
	stopProc(g.cmd)
	stopProc(g2.cmd)
	for i := len(b.procs) - 1; i >= 0; i-- {
		stopProc(b.procs[i])
	}
	v := b.openVault(t)
	for _, who := range []struct{ name, principal string }{{"alice", aliceID}, {"bob", bobID}} {
		gr, err := v.Get(context.Background(), who.principal, "bank")
		if err != nil || gr.AccessToken == "" || gr.RefreshToken == "" {
			t.Errorf("%s's grant at the end: %v, or without its tokens", who.name, err)
		}
		sec.addGrant(who.name+" (at the end)", gr)
	}
	v.Close()
	for what, path := range map[string]string{
		"verdictd's log": b.path("verdictd.log"), "the executor's log": b.path("executor.log"),
		"the gateway's log": g.log, "the other gateway's log": g2.log,
		"the bank's log": b.path("bank.log"), "the bank's call log": b.bankLog, "the bank's ledger": b.path("bank.json"),
	} {
		out.add(what, readFile(path))
	}
	services := map[string]bool{}
	for _, sp := range spans.Spans() {
		services[sp.Service] = true
	}
	if !services["mcpgate"] || !services["verdictd"] || !services["executor"] {
		t.Errorf("spans of %v, want the gateway's, verdictd's and the executor's", services)
	}
	out.addJSON("the spans", spans.Spans())
	out.addJSON("the URL elicitations alice's host was sent", ha.shownURLs())
	for who, h := range map[string]*connectHost{"alice": ha, "bob": hb, "alice's second": hr} {
		out.add("the forms "+who+"'s host was sent", strings.Join(h.u.shown(), "\n"))
	}

	for i, name := range out.names {
		if out.texts[i] == "" {
			t.Errorf("%s is empty: nothing was looked for there", name)
		}
	}
	for what, secret := range sec {
		if secret == "" {
			continue
		}
		for i, name := range out.names {
			if strings.Contains(out.texts[i], secret) {
				t.Errorf("%s holds %s", name, what)
			}
			// A JWT's signature alone is as much the token's.
			if parts := strings.Split(secret, "."); len(parts) == 3 && strings.Contains(out.texts[i], parts[2]) {
				t.Errorf("%s holds the signature of %s", name, what)
			}
		}
	}
}
