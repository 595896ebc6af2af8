package console

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/store"
	"github.com/verdictgate/verdict/vault"
)

// stubVerdictd implements verdictd's side of the approvals contract (docs/console.md) and the
// records exports of verdictd and the executor, over a real bbolt file, and records what the
// console sent it.
type stubVerdictd struct {
	now       func() time.Time
	readToken string
	db        *store.DB

	mu        sync.Mutex
	approvals map[string]*stubApproval
	order     []string
	posts     []stubPost
	gets      []string // the Authorization header of every approvals GET

	// The executor's grants API: the grants by principal, tokens and all, of which it answers
	// what may be shown (vault.Grant.Info); the principal whose stored grant at a server does
	// not open; the revocation's upstream answer by server (default revoked); and what the
	// console asked for, "GET principal" or "DELETE principal server".
	grants     map[string][]vault.Grant
	unreadable map[string]string
	upstream   map[string]string
	noVault    bool
	grantCalls []string

	// notReady makes verdictd's /readyz answer 503.
	notReady bool
}

// stubApproval is one approval with its rules.
type stubApproval struct {
	approval
	Group    string
	Groups   map[string][]string // approver subject → groups
	FourEyes bool
}

type stubPost struct {
	ID, Authorization, Decision, Digest string
}

func newStub(t *testing.T, now func() time.Time) *stubVerdictd {
	db, err := store.Open(filepath.Join(t.TempDir(), "records.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return &stubVerdictd{now: now, readToken: "read-" + strconv.Itoa(int(now().Unix())), db: db, approvals: map[string]*stubApproval{}}
}

func (s *stubVerdictd) add(a stubApproval) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals[a.ApprovalID] = &a
	s.order = append([]string{a.ApprovalID}, s.order...)
}

// setDigest changes what the pending call's digest is, as when its values changed.
func (s *stubVerdictd) setDigest(id, digest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals[id].ArgumentsDigest = digest
}

func (s *stubVerdictd) sent() ([]stubPost, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts), slices.Clone(s.gets)
}

// subjectOf reads the approver from a bearer token: the stub trusts the token's claims without
// checking its signature (verdictd verifies; this stands in for it). Tokens of the unit tests
// are unsigned JWTs; the browser tests' are the provider's.
func subjectOf(r *http.Request) (string, bool) { return bearerSubject(r.Header.Get("Authorization")) }

// bearerSubject is subjectOf for an Authorization header's value.
func bearerSubject(authorization string) (string, bool) {
	tok, ok := strings.CutPrefix(authorization, "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var c struct{ Iss, Sub string }
	if json.Unmarshal(payload, &c) != nil || c.Sub == "" {
		return "", false
	}
	return c.Iss + "#" + c.Sub, true
}

// fakeToken is an unsigned JWT naming iss and sub.
func fakeToken(iss, sub string) string {
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	return enc(map[string]string{"alg": "none"}) + "." + enc(map[string]string{"iss": iss, "sub": sub}) + ".sig"
}

// sees reports whether approver may read a, as verdictd answers it: the call's principal, the
// one who decided it, and a member of its group; to anyone else it does not exist.
func (s *stubVerdictd) sees(a *stubApproval, approver string) bool {
	return approver == a.Principal || approver == a.DecidedBy || (a.Group != "" && slices.Contains(a.Groups[approver], a.Group))
}

// view is the approval as the approver asking sees it, with may_decide and refusal.
func (s *stubVerdictd) view(a *stubApproval, approver string) approval {
	v := a.approval
	v.FourEyes, v.Group = a.FourEyes, a.Group
	v.MayDecide, v.Refusal = true, ""
	if code := s.refuse(a, approver); code != "" {
		v.MayDecide, v.Refusal = false, code
	}
	return v
}

func (s *stubVerdictd) refuse(a *stubApproval, approver string) string {
	switch {
	case a.State != api.ApprovalPending:
		return "already_decided"
	case !s.now().Before(a.ExpiresAt):
		return "approval_expired"
	case a.FourEyes && approver == a.Principal:
		return "self_approval"
	case a.Group != "" && !slices.Contains(a.Groups[approver], a.Group):
		return "approver_not_in_group"
	}
	return ""
}

var refusalStatus = map[string]int{
	"already_decided": 409, "approval_expired": 410, "self_approval": 403, "approver_not_in_group": 403,
	"approval_value_mismatch": 409, "not_found": 404, "unauthorized": 401,
}

func fail(w http.ResponseWriter, code string) {
	httpx.WriteError(w, &httpx.Error{Status: refusalStatus[code], Code: code, Message: "stub refused: " + code})
}

// verdictd is verdictd's handler.
func (s *stubVerdictd) verdictd() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		httpx.WriteReadiness(w, !s.notReady, nil, nil, nil)
	})
	mux.HandleFunc("GET /v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.gets = append(s.gets, r.Header.Get("Authorization"))
		who, ok := subjectOf(r)
		if !ok {
			fail(w, "unauthorized")
			return
		}
		out := []approval{}
		for _, id := range s.order {
			if a := s.approvals[id]; s.sees(a, who) && (r.URL.Query().Get("state") == "" || a.State == r.URL.Query().Get("state")) {
				out = append(out, s.view(a, who))
			}
		}
		httpx.WriteJSON(w, 200, map[string]any{"approvals": out})
	})
	mux.HandleFunc("GET /v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.gets = append(s.gets, r.Header.Get("Authorization"))
		who, ok := subjectOf(r)
		if !ok {
			fail(w, "unauthorized")
			return
		}
		a := s.approvals[r.PathValue("id")]
		if a == nil || !s.sees(a, who) {
			fail(w, "not_found")
			return
		}
		httpx.WriteJSON(w, 200, s.view(a, who))
	})
	mux.HandleFunc("POST /v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Decision        string `json:"decision"`
			ArgumentsDigest string `json:"arguments_digest"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			httpx.WriteError(w, &httpx.Error{Status: 400, Code: "malformed_json", Message: err.Error()})
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.posts = append(s.posts, stubPost{ID: r.PathValue("id"), Authorization: r.Header.Get("Authorization"),
			Decision: body.Decision, Digest: body.ArgumentsDigest})
		who, ok := subjectOf(r)
		if !ok {
			fail(w, "unauthorized")
			return
		}
		a := s.approvals[r.PathValue("id")]
		if a == nil || !s.sees(a, who) {
			fail(w, "not_found")
			return
		}
		if code := s.refuse(a, who); code != "" {
			fail(w, code)
			return
		}
		if body.ArgumentsDigest != a.ArgumentsDigest {
			fail(w, "approval_value_mismatch")
			return
		}
		a.State = map[string]string{api.DecisionApprove: api.ApprovalApproved, api.DecisionDeny: api.ApprovalDenied}[body.Decision]
		if a.State == "" {
			httpx.WriteError(w, &httpx.Error{Status: 400, Code: "bad_decision", Message: body.Decision})
			return
		}
		a.DecidedBy, a.DecidedAt = who, s.now()
		httpx.WriteJSON(w, 200, s.view(a, who))
	})
	mux.HandleFunc("GET /v1/records", s.admin(func(w http.ResponseWriter, r *http.Request, mask store.Masker) {
		s.export(w, func(wr *strings.Builder) (int, error) {
			return s.db.Decisions().ExportJSONLCount(r.Context(), wr, time.Unix(0, 0), mask)
		})
	}))
	mux.HandleFunc("GET /v1/records/{id}", s.admin(func(w http.ResponseWriter, r *http.Request, mask store.Masker) {
		d, err := s.db.Decisions().Get(r.Context(), r.PathValue("id"))
		if err != nil || d == nil {
			fail(w, "not_found")
			return
		}
		rec := []byte(d.Record)
		if mask != nil {
			rec, _ = mask.Mask(rec)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(rec)
	}))
	return mux
}

// addGrant stores g, as the executor's vault would.
func (s *stubVerdictd) addGrant(g vault.Grant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grants == nil {
		s.grants = map[string][]vault.Grant{}
	}
	s.grants[g.Principal] = append(s.grants[g.Principal], g)
}

// grantsOf returns the servers of principal's grants, and the calls of the grants API so far.
func (s *stubVerdictd) grantsOf(principal string) ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var servers []string
	for _, g := range s.grants[principal] {
		servers = append(servers, g.Server)
	}
	return servers, slices.Clone(s.grantCalls)
}

// grantsAPI answers GET /v1/grants and DELETE /v1/grants/{server} as the executor does.
func (s *stubVerdictd) grantsAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/grants", s.admin(func(w http.ResponseWriter, r *http.Request, _ store.Masker) {
		s.mu.Lock()
		defer s.mu.Unlock()
		principal := r.URL.Query().Get("principal")
		s.grantCalls = append(s.grantCalls, "GET "+principal)
		switch {
		case s.noVault:
			httpx.WriteError(w, httpx.Errorf(404, api.CodeNotFound, "this executor keeps no grants: no server is called with mode user_grant"))
			return
		case s.unreadable[principal] != "":
			httpx.WriteError(w, httpx.Errorf(500, api.CodeGrantUnreadable, "the stored grant of the principal at %q does not open", s.unreadable[principal]))
			return
		}
		out := api.Grants{Grants: []api.Grant{}}
		for _, g := range s.grants[principal] {
			out.Grants = append(out.Grants, g.Info())
		}
		httpx.WriteJSON(w, 200, out)
	}))
	mux.HandleFunc("DELETE /v1/grants/{server}", s.admin(func(w http.ResponseWriter, r *http.Request, _ store.Masker) {
		s.mu.Lock()
		defer s.mu.Unlock()
		principal, server := r.URL.Query().Get("principal"), r.PathValue("server")
		s.grantCalls = append(s.grantCalls, "DELETE "+principal+" "+server)
		i := slices.IndexFunc(s.grants[principal], func(g vault.Grant) bool { return g.Server == server })
		if i < 0 {
			httpx.WriteError(w, httpx.Errorf(404, api.CodeNotFound, "no grant of %q at %q", principal, server))
			return
		}
		g := s.grants[principal][i]
		s.grants[principal] = slices.Delete(s.grants[principal], i, i+1)
		httpx.WriteJSON(w, 200, api.GrantRevoked{Grant: g.Info(), Upstream: cmp.Or(s.upstream[server], api.GrantUpstreamRevoked)})
	}))
}

// executor is the executor's handler.
func (s *stubVerdictd) executor() http.Handler {
	mux := http.NewServeMux()
	s.grantsAPI(mux)
	mux.HandleFunc("GET /v1/executions", s.admin(func(w http.ResponseWriter, r *http.Request, mask store.Masker) {
		vid := r.URL.Query().Get("verdict_id")
		s.export(w, func(wr *strings.Builder) (int, error) {
			if vid == "" {
				return s.db.Executions().ExportJSONLCount(r.Context(), wr, time.Unix(0, 0), mask)
			}
			xs, err := s.db.Executions().ByVerdict(r.Context(), vid)
			for _, x := range xs {
				b, _ := json.Marshal(x)
				if mask != nil {
					b, _ = mask.Mask(b)
				}
				wr.Write(append(b, '\n'))
			}
			return len(xs), err
		})
	}))
	mux.HandleFunc("GET /v1/executions/{id}", s.admin(func(w http.ResponseWriter, r *http.Request, _ store.Masker) {
		x, err := s.db.Executions().Get(r.Context(), r.PathValue("id"))
		if err != nil || x == nil {
			fail(w, "not_found")
			return
		}
		httpx.WriteJSON(w, 200, x)
	}))
	return mux
}

func (s *stubVerdictd) admin(h func(http.ResponseWriter, *http.Request, store.Masker)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+s.readToken {
			fail(w, "unauthorized")
			return
		}
		var m store.Masker
		if r.URL.Query().Get("mask") == "1" {
			m = store.DefaultMask()
		}
		h(w, r, m)
	}
}

func (s *stubVerdictd) export(w http.ResponseWriter, write func(*strings.Builder) (int, error)) {
	var b strings.Builder
	n, err := write(&b)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	w.Header().Set("Trailer", api.ExportCompleteTrailer+", "+api.ExportRecordsTrailer)
	w.Header().Set("Content-Type", "application/x-ndjson")
	fmt.Fprint(w, b.String())
	w.Header().Set(api.ExportCompleteTrailer, "true")
	w.Header().Set(api.ExportRecordsTrailer, strconv.Itoa(n))
}

// addDecision stores a decision record of principal on server/tool.
func (s *stubVerdictd) addDecision(t *testing.T, id, outcome, verdictID, principal, server, tool string, at time.Time, args map[string]any) {
	t.Helper()
	body := map[string]any{
		"schema_version": "1", "record_id": id, "action_key": principal + ":pay:" + server + "/" + tool, "phase": "at_trigger",
		"principal": principal, "server": server, "tool": tool, "outcome": outcome,
		"verdict_id": nullable(verdictID), "arguments_digest": "sha256:" + strings.Repeat("1", 64),
		"call_arguments": args, "timestamp": at.Format(time.RFC3339Nano),
	}
	b, _ := json.Marshal(body)
	meta := store.DecisionMeta{RecordID: id, ActionKey: principal + ":pay:" + server + "/" + tool, Outcome: outcome, VerdictID: verdictID, Time: at}
	if err := s.db.Decisions().Append(context.Background(), meta, b); err != nil {
		t.Fatal(err)
	}
}

// addExecution stores an executed attempt of verdict vid, issued by record rec.
func (s *stubVerdictd) addExecution(t *testing.T, id, vid, rec, principal, server, tool string, at time.Time) {
	t.Helper()
	x := &api.ExecutionRecord{RecordID: id, ExecutorID: "executor-bank", VerdictID: vid, ActionKey: principal + ":pay:" + server + "/" + tool,
		RefPhase: "at_trigger", RefRecord: rec, Principal: principal, Server: server, Tool: tool,
		ArgumentsDigest: "sha256:" + strings.Repeat("1", 64), StartedAt: at, Verdict: "eyJ.eyJ.sig"}
	ctx := context.Background()
	if err := s.db.Executions().Start(ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Executions().Finish(ctx, id, api.ExecutionExecuted, "", "sha256:result", at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// harness is a console in front of a stub verdictd and executor.
type harness struct {
	t       *testing.T
	clock   *clock
	stub    *stubVerdictd
	console *Server
	srv     *httptest.Server
	// verdictd is the stub verdictd's server.
	verdictd *httptest.Server
	issuer   string
	cfg      Config
	// front is the handler srv sends each request to: console's, or another replica's, as a
	// load balancer without sticky sessions would.
	front atomic.Pointer[http.Handler]
}

// newHarness starts the stubs and a console whose public URL is its own test server's.
func newHarness(t *testing.T, issuer string, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: newClock(), issuer: issuer}
	h.stub = newStub(t, h.clock.Now)
	vd := httptest.NewServer(h.stub.verdictd())
	t.Cleanup(vd.Close)
	h.verdictd = vd
	ex := httptest.NewServer(h.stub.executor())
	t.Cleanup(ex.Close)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.front.Load()).ServeHTTP(w, r) }))
	t.Cleanup(h.srv.Close)

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "read.token")
	if err := os.WriteFile(tokenFile, []byte(h.stub.readToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Listen: "127.0.0.1:0", PublicURL: h.srv.URL,
		OIDC:         OIDC{Issuer: issuer, ClientID: "native"},
		Verdictd:     Upstream{URL: vd.URL, ReadTokenFile: tokenFile},
		Executor:     Upstream{URL: ex.URL, ReadTokenFile: tokenFile},
		ValuesGroups: []string{"auditors"},
		Session:      Session{TTL: confx.Duration(8 * time.Hour), IdleTimeout: confx.Duration(2 * time.Hour)},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h.cfg = cfg
	h.console = h.replica()
	h.serve(h.console)
	return h
}

// replica starts another console with the harness's config, as another replica (or the same
// one after a restart) would run; it is closed when the test ends.
func (h *harness) replica() *Server {
	h.t.Helper()
	c, err := New(context.Background(), h.cfg, Options{Now: h.clock.Now})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// serve makes c answer every request to the harness's address from now on.
func (h *harness) serve(c *Server) {
	handler := c.Handler()
	h.front.Store(&handler)
}

// signIn makes a session for subject sub at the harness's issuer, as a sign-in would, and
// returns its cookie.
func (h *harness) signIn(sub string, groups ...string) *http.Cookie {
	subject := h.issuer + "#" + sub
	id, _, err := h.console.sessions.create(context.Background(), session{Subject: subject, Name: sub, Groups: groups,
		AccessToken: fakeToken(h.issuer, sub), TokenExpiry: h.clock.Now().Add(time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	return &http.Cookie{Name: h.console.sessionCookie.name, Value: id}
}

// csrf returns the form token of the session behind cookie.
func (h *harness) csrf(c *http.Cookie) string {
	s, err := h.console.sessions.get(context.Background(), c.Value)
	if err != nil {
		h.t.Fatal(err)
	}
	return s.CSRF
}
