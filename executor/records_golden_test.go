package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/vault"
	"github.com/verdictgate/verdict/verdict"
)

// updateGolden rewrites the golden files of TestRecordsGolden from this run.
var updateGolden = flag.Bool("update", false, "rewrite testdata/records/*.golden from this run")

// golden is the text a golden test compares with its file: the bytes of every record it saw,
// each under a heading. Values a run makes afresh are given names in the order they first
// appear, so that two runs of the same scenarios give the same text: record ids, grant ids and
// signed tokens (each a fresh key's) by their form, and whatever else the test names (a
// port, a time read from the wall clock). Everything else is compared byte for byte.
type golden struct {
	t     *testing.T
	out   bytes.Buffer
	subst [][2]string
	names map[string]string
	count map[string]int
}

// freshValue matches the values a run makes afresh by their form: a compact JWS, an execution
// record id (a ULID) and a vault grant id.
var freshValue = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*|\bexe_[0-9A-HJKMNP-TV-Z]{26}\b|\bg_[0-9a-f]{32}\b`)

func newGolden(t *testing.T) *golden {
	return &golden{t: t, names: map[string]string{}, count: map[string]int{}}
}

// known names an exact text of this run, replaced before anything else.
func (g *golden) known(text, name string) {
	if text != "" {
		g.subst = append(g.subst, [2]string{text, name})
	}
}

func (g *golden) name(kind, v string) string {
	if n, ok := g.names[v]; ok {
		return n
	}
	g.count[kind]++
	n := fmt.Sprintf("<%s %d>", kind, g.count[kind])
	g.names[v] = n
	return n
}

func (g *golden) stable(b []byte) []byte {
	for _, s := range g.subst {
		b = bytes.ReplaceAll(b, []byte(s[0]), []byte(s[1]))
	}
	return freshValue.ReplaceAllFunc(b, func(m []byte) []byte {
		kind := "jws"
		switch {
		case bytes.HasPrefix(m, []byte("exe_")):
			kind = "exe"
		case bytes.HasPrefix(m, []byte("g_")):
			kind = "grant"
		}
		return []byte(g.name(kind, string(m)))
	})
}

// add writes b under heading.
func (g *golden) add(heading string, b []byte) {
	fmt.Fprintf(&g.out, "== %s\n%s\n", g.stable([]byte(heading)), bytes.TrimRight(g.stable(b), "\n"))
}

// addSorted writes lines under heading in sorted order, for lines whose order is a run's
// (a bucket of random keys).
func (g *golden) addSorted(heading string, lines [][]byte) {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(g.stable(l))
	}
	slices.Sort(out)
	g.add(heading, []byte(strings.Join(out, "\n")))
}

// check compares the text with testdata/records/name.golden, or writes it there with -update.
func (g *golden) check(name string) {
	g.t.Helper()
	path := filepath.Join("testdata", "records", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(path, g.out.Bytes(), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%v (go test -run TestRecordsGolden -update writes it)", err)
	}
	if bytes.Equal(want, g.out.Bytes()) {
		return
	}
	got, wantLines := strings.Split(g.out.String(), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(got), len(wantLines)) {
		var a, b string
		if i < len(got) {
			a = got[i]
		}
		if i < len(wantLines) {
			b = wantLines[i]
		}
		if a != b {
			g.t.Fatalf("%s differs at line %d:\ngot  %q\nwant %q", path, i+1, a, b)
		}
	}
}

// standingClock is a service's clock that moves only when the test moves it.
type standingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *standingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *standingClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// goldenStart is when the clock of the golden scenarios stands: not UTC, and with nanoseconds,
// so that a record shows how its times are written.
var goldenStart = time.Date(2031, 3, 4, 5, 6, 7, 890123456, time.FixedZone("UTC+9", 9*3600))

// goldenJTI is a verdict id named name: base64url, 144 bits.
func goldenJTI(name string) string { return name + strings.Repeat("0", 24-len(name)) }

// goldenClaims are valid claims of jti for tool of the bank with args, issued at now. The action
// key holds what a JSON encoder may escape.
func (e *env) goldenClaims(jti, tool string, args map[string]any, now time.Time) verdict.Claims {
	e.t.Helper()
	def, ok := e.svc.catalog.Lookup("bank", tool)
	if !ok {
		e.t.Fatalf("bank/%s not in catalog", tool)
	}
	digest, err := canonical.Digest(args)
	if err != nil {
		e.t.Fatal(err)
	}
	return verdict.Claims{
		Issuer: issuerID, Subject: "u_01", Audience: []string{execID},
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiry: now.Unix() + 60, ID: jti,
		Server: "bank", Tool: tool, ToolDigest: def.Digest, Policy: "test.1", Arguments: digest,
		ActionKey: "u_01:pay <landlord> & \"co\" \u2028:bank/" + tool, Phase: "at_trigger", Record: "rec_golden",
	}
}

// do sends method path to the service as the caller (admin false) or the admin, with body and
// header, and returns the status and body.
func (e *env) do(method, path string, admin bool, body string, header map[string]string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	tok := callerToken
	if admin {
		tok = adminToken
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// goldenExecute presents token with args (and the headers of header) and adds the answer to
// g under name; it returns the answer's record id, "" without one.
func (e *env) goldenExecute(g *golden, name, token, args string, header map[string]string) string {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"verdict": token, "arguments": json.RawMessage(args)})
	if err != nil {
		e.t.Fatal(err)
	}
	status, answer := e.do("POST", "/v1/execute", false, string(body), header)
	g.add(fmt.Sprintf("%s: POST /v1/execute %d", name, status), answer)
	var a struct {
		Execution struct {
			RecordID string `json:"record_id"`
		} `json:"execution"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		e.t.Fatalf("%s: %v: %s", name, err, answer)
	}
	return a.Execution.RecordID
}

// goldenRecords adds to g every record of the service as its admin API exports it (whole, by
// verdict id, by record id, masked) and as its store holds it.
func (e *env) goldenRecords(g *golden, jtis, ids []string) {
	e.t.Helper()
	get := func(path string) {
		status, b := e.do("GET", path, true, "", nil)
		g.add(fmt.Sprintf("GET %s %d", path, status), b)
	}
	get("/v1/executions")
	get("/v1/executions?mask=1")
	for _, jti := range jtis {
		get("/v1/executions?verdict_id=" + jti)
	}
	for _, id := range ids {
		if id != "" {
			status, b := e.do("GET", "/v1/executions/"+id, true, "", nil)
			g.add(fmt.Sprintf("GET /v1/executions/%s %d", id, status), b)
		}
	}
	var stored [][]byte
	err := e.svc.db.View(context.Background(), func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("executions")).ForEach(func(_, v []byte) error {
			stored = append(stored, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	g.addSorted("stored", stored)
}

// TestRecordsGolden holds the execution records the executor writes, byte for byte, to
// testdata/records: as each answer carries it, as the admin API exports it and as the store
// holds it, for every outcome and the fields each sets or leaves null.
func TestRecordsGolden(t *testing.T) {
	t.Run("outcomes", func(t *testing.T) {
		clk := &standingClock{t: goldenStart}
		e := newEnv(t, envOpts{clock: clk.now})
		g := newGolden(t)
		balance := map[string]any{"account": "1102534471"}
		const balanceJSON = `{"account":"1102534471"}`
		var ids, jtis []string
		run := func(name, token, args string) {
			ids = append(ids, e.goldenExecute(g, name, token, args, nil))
			clk.advance(time.Second)
		}

		executed := e.sign(e.goldenClaims(goldenJTI("jti-executed"), "get_balance", balance, clk.now()))
		run("executed", executed, balanceJSON)
		run("replayed", executed, balanceJSON)
		big := map[string]any{"from_account": "1102534471", "to_account": "110-222-333", "amount": 999_999_999}
		run("failed", e.sign(e.goldenClaims(goldenJTI("jti-failed"), "transfer", big, clk.now())),
			`{"from_account":"1102534471","to_account":"110-222-333","amount":999999999}`)
		run("malformed", "not.a.jws", balanceJSON)
		run("malformed_too_long", strings.Repeat("x", verdict.MaxTokenBytes+1), balanceJSON)
		valid := e.sign(e.goldenClaims(goldenJTI("jti-bad-signature"), "get_balance", balance, clk.now()))
		parts := strings.Split(valid, ".")
		run("bad_signature", parts[0]+"."+parts[1]+"."+flip(parts[2]), balanceJSON)
		c := e.goldenClaims(goldenJTI("jti-expired"), "get_balance", balance, clk.now())
		c.IssuedAt, c.NotBefore, c.Expiry = c.IssuedAt-120, c.NotBefore-120, c.Expiry-120
		run("expired", e.sign(c), balanceJSON)
		run("arguments_mismatch", e.sign(e.goldenClaims(goldenJTI("jti-mismatch"), "get_balance", balance, clk.now())), `{"account":"220-555-010"}`)
		c = e.goldenClaims(goldenJTI("jti-unknown-tool"), "get_balance", balance, clk.now())
		c.Tool = "drain_account"
		run("unknown_tool", e.sign(c), balanceJSON)
		// A claim that is not UTF-8, signed as it is: the verdict is malformed, and its
		// refusal names none of its claims.
		c = e.goldenClaims(goldenJTI("jti-not-utf8"), "get_balance", balance, clk.now())
		payload, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		payload = bytes.Replace(payload, []byte(`"u_01:pay`), []byte("\"\xff\xfe u_01:pay"), 1)
		notUTF8, err := e.issuer.SignCompact(payload, verdict.TypeVerdict)
		if err != nil {
			t.Fatal(err)
		}
		run("not_utf8_claim", notUTF8, `{"account":"220-555-010"}`)
		// A verdict without phase and record: malformed too.
		c = e.goldenClaims(goldenJTI("jti-empty-claims"), "get_balance", balance, clk.now())
		c.Phase, c.Record = "", ""
		payload, err = json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		empty, err := e.issuer.SignCompact(payload, verdict.TypeVerdict)
		if err != nil {
			t.Fatal(err)
		}
		run("empty_claims", empty, balanceJSON)

		jtis = []string{goldenJTI("jti-executed"), goldenJTI("jti-failed"), goldenJTI("jti-expired"), goldenJTI("jti-not-utf8"), goldenJTI("jti-empty-claims"), goldenJTI("jti-none")}
		e.goldenRecords(g, jtis, ids)
		g.check("outcomes")
	})

	t.Run("crashed_in_flight", func(t *testing.T) {
		clk := &standingClock{t: goldenStart}
		e := newEnv(t, envOpts{bankArgs: []string{"--hang"}, callTimeout: time.Hour, clock: clk.now})
		g := newGolden(t)
		args := map[string]any{"from_account": "1102534471", "to_account": "110-222-333", "amount": 1000}
		tok := e.sign(e.goldenClaims(goldenJTI("jti-crashed"), "transfer", args, clk.now()))
		body, err := json.Marshal(map[string]any{"verdict": tok, "arguments": args})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/execute", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+callerToken)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		// The call is at the bank, and its started record committed before it went: a copy of
		// the file now is what a crash would leave.
		e.waitArrival("transfer")
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		err = e.svc.db.View(context.Background(), func(tx *bolt.Tx) error {
			return tx.CopyFile(filepath.Join(dir, "data", DBFile), 0o600)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.catalog.Close(); err != nil {
			t.Log(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Second)
		r := &env{t: t, dir: dir, issuer: e.issuer, bankLog: filepath.Join(dir, "bank.log"), clock: clk.now}
		cfg := e.svc.cfg
		cfg.DataDir = filepath.Join(dir, "data")
		cfg.Servers = map[string]upstream.Config{"bank": {Command: []string{bankCmd.Path(t), "--state", filepath.Join(dir, "bank.json"), "--log", r.bankLog}}}
		r.svc = r.open(cfg)
		clk.advance(time.Second)
		id := r.goldenExecute(g, "crashed verdict presented again", tok, `{"from_account":"1102534471","to_account":"110-222-333","amount":1000}`, nil)
		r.goldenRecords(g, []string{goldenJTI("jti-crashed")}, []string{id})
		g.check("crashed_in_flight")
	})

	t.Run("consumed_without_start", func(t *testing.T) {
		ep := etcdtest.Start(t)
		clk := &standingClock{t: goldenStart}
		e := newEnv(t, envOpts{clock: clk.now})
		cfg := e.svc.cfg
		cfg.NonceStore = NonceStore{Kind: "etcd", Config: etcdx.Config{Endpoints: []string{ep}, Prefix: "/test/", RequestTimeout: confxDuration(5 * time.Second)}}
		e.srv.Close()
		if err := e.svc.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.svc = e.open(cfg)
		g := newGolden(t)
		ctx := context.Background()
		inst, err := e.svc.db.FileID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		earlier, err := nonce.NewEtcd(ctx, nonce.EtcdOptions{Endpoints: []string{ep}, Prefix: "/test/", Owner: execID, Instance: inst, Now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		defer earlier.Close()
		c := e.goldenClaims(goldenJTI("jti-lost"), "get_balance", map[string]any{"account": "1102534471"}, clk.now())
		tok := e.sign(c)
		if err := earlier.Consume(ctx, c.ID, time.Unix(c.Expiry, 0)); err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Second)
		for range 2 { // a second pass finds it accounted for
			if err := e.svc.reconcileEarlierRuns(ctx, e.svc.recon); err != nil {
				t.Fatal(err)
			}
		}
		clk.advance(time.Second)
		id := e.goldenExecute(g, "lost verdict presented again", tok, `{"account":"1102534471"}`, nil)
		e.goldenRecords(g, []string{goldenJTI("jti-lost")}, []string{id})
		g.check("consumed_without_start")
	})

	t.Run("credentials", func(t *testing.T) {
		key := writeVaultKey(t, t.TempDir(), "vault.key")
		// exchanged is the token_exchange server files was before withUserGrant made it a
		// user_grant one.
		x := newExchangeEnv(t, func(c *Config) {
			c.Servers["exchanged"], c.Credentials["exchanged"] = c.Servers["files"], c.Credentials["files"]
		}, withUserGrant(key))
		g := newGolden(t)
		// The users' tokens are the OP's, checked against the executor's clock: it stands at
		// a time of this run, which the text names.
		start := time.Now().UTC().Truncate(time.Second).Add(123456789)
		x.stand(start)
		for i := range 20 {
			g.known(start.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), fmt.Sprintf("<start+%ds>", i))
		}
		alice := x.op.AuthCode(t, "test-user@127.0.0.1") // sub id1
		aliceID := identity.PrincipalID(x.op.Issuer, "id1")
		g.known(aliceID, "<alice>")
		g.known(x.op.Issuer, "<op>")
		var ids, jtis []string
		run := func(name, server, tok string) {
			v := x.verdict(server, aliceID)
			jti := x.claimsID(v)
			g.known(jti, fmt.Sprintf("<jti %d>", len(jtis)+1))
			jtis = append(jtis, jti)
			h := map[string]string{}
			if tok != "" {
				h[identity.SubjectTokenHeader] = tok
			}
			ids = append(ids, x.goldenExecute(g, name, v, `{}`, h))
			x.setClock(time.Duration(len(ids)) * time.Second)
		}
		run("token_exchange executed", "exchanged", alice)
		run("token_exchange refused by the identity provider", "denied", alice)
		run("user_grant without a grant", "files", alice)
		if err := x.svc.vault.Put(context.Background(), vault.Grant{Principal: aliceID, Server: "files", Kind: vault.KindUserGrant,
			AccessToken: x.op.ClientCredentials(t, "lister", "lister-secret"), TokenType: "Bearer"}); err != nil {
			t.Fatal(err)
		}
		run("user_grant executed", "files", alice)
		run("user_grant executed with the user away", "files", "")
		run("shared executed", "shared", "")
		x.goldenRecords(g, jtis, ids)
		g.check("credentials")
	})
}
