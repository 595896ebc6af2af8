package verdictd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// opCmd is the example OpenID Provider, built once for the tests that need one.
var opCmd = testbin.New(testop.Package)

const (
	narrowToken = "narrow-caller-secret"
	// gatewayResource is the resource the subject tokens are issued for: the gateway whose
	// users they are, which forwards them.
	gatewayResource = "https://gateway.test/mcp"
)

// TestCallersPrincipalsConfig: the principals key is required and its patterns checked, and
// problems of the identity section are placed at their keys.
func TestCallersPrincipalsConfig(t *testing.T) {
	const head = "listen: 127.0.0.1:0\ndata_dir: /d\nissuer: v\nsigning_key: k\npolicy: p\n"
	hash := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name, body string
		want       []string // after "<file>:"
	}{
		{"principals absent", head + "callers:\n  - {name: agent, token_sha256: \"" + hash + "\"}\n",
			[]string{`7:5: callers[0] (agent): principals is required: list the principals this caller may act for`}},
		{"patterns", head + "callers:\n  - {name: agent, token_sha256: \"" + hash + "\", principals: [\"a*b\", \"\"]}\n",
			[]string{`7:114: callers[0].principals[0]: "a*b": a pattern has one "*", at its end`,
				`7:121: callers[0].principals[1]: "" is not a principal id or pattern`}},
		{"a name twice", head + "callers:\n  - {name: agent, token_sha256: \"" + hash + "\", principals: []}\n" +
			"  - {name: agent, token_sha256: \"" + hash + "\", principals: []}\n",
			[]string{`8:6: callers[1].name: "agent" is also the name of callers[0]`}},
		{"identity", head + "callers:\n  - {name: agent, token_sha256: \"" + hash + "\", principals: []}\n" +
			"identity:\n  issuers:\n    - issuer: http://idp.example.com\n      audience: x\n",
			[]string{`10:7: identity.issuers[0].issuer: "http://idp.example.com" must be an https URL`,
				`11:7: identity.issuers[0].audience: "x" is not an absolute URI`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "verdictd.yaml")
			if err := os.WriteFile(p, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(p)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), p+":"+w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
	// [] is a caller that names no principal, not a missing key.
	p := filepath.Join(t.TempDir(), "verdictd.yaml")
	body := head + "callers: [{name: executor, token_sha256: \"" + hash + "\", principals: []}]\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(p); err != nil {
		t.Fatal(err)
	}
}

// post sends a preflight of principal with the caller's token and, if subject is not "", a
// subject token; it returns the status and the error code, if any.
func (e *env) post(token, principal, subject string) (int, string) {
	e.t.Helper()
	body, err := json.Marshal(landlord())
	if err != nil {
		e.t.Fatal(err)
	}
	body = bytes.Replace(body, []byte(`"principal":"u_01"`), []byte(`"principal":`+string(mustMarshal(e.t, principal))), 1)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/preflight", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if subject != "" {
		req.Header.Set(identity.SubjectTokenHeader, subject)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Principal string `json:"principal"`
		Error     struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK && ans.Principal != principal {
		e.t.Errorf("record of %q, want %q", ans.Principal, principal)
	}
	return resp.StatusCode, ans.Error.Code
}

func mustMarshal(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// principalsRecorded returns the principals of every decision record since start.
func (e *env) principalsRecorded(since time.Time) []string {
	var out []string
	for _, r := range e.recordsSince(since) {
		out = append(out, r.Principal)
	}
	return out
}

// recordsSince returns every decision record since start.
func (e *env) recordsSince(since time.Time) []api.Record {
	e.t.Helper()
	status, body := do(e.t, "GET", e.srv.URL+"/v1/records?since="+since.UTC().Add(-time.Second).Format(time.RFC3339), adminToken, "", nil)
	if status != http.StatusOK {
		e.t.Fatalf("records: %d %s", status, body)
	}
	var out []api.Record
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if l == "" {
			continue
		}
		var r api.Record
		if err := apijson.Unmarshal([]byte(l), &r); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestCallerActsOnlyForItsPrincipals: a preflight naming a principal its caller's entry does
// not list is refused with 403 principal_not_allowed, and nothing of it is recorded.
func TestCallerActsOnlyForItsPrincipals(t *testing.T) {
	start := time.Now()
	e := newEnv(t, envOpts{mutate: func(c *Config) {
		c.Callers = []Caller{
			{Name: "agent", TokenSHA256: httpx.HashToken(callerToken), Principals: []string{"u_01", "team-*"}},
			{Name: "narrow", TokenSHA256: httpx.HashToken(narrowToken), Principals: []string{}},
		}
	}})
	for _, tc := range []struct {
		token, principal string
		status           int
		code             string
	}{
		{callerToken, "u_01", 200, ""},
		{callerToken, "team-7", 200, ""},
		{callerToken, "u_02", 403, api.CodePrincipalNotAllowed},
		{callerToken, "u_01x", 403, api.CodePrincipalNotAllowed},
		{callerToken, "team", 403, api.CodePrincipalNotAllowed},
		{narrowToken, "u_01", 403, api.CodePrincipalNotAllowed},
	} {
		if status, code := e.post(tc.token, tc.principal, ""); status != tc.status || code != tc.code {
			t.Errorf("%s for %s: %d %s, want %d %s", tc.token, tc.principal, status, code, tc.status, tc.code)
		}
	}
	if got := strings.Join(e.principalsRecorded(start), " "); got != "u_01 team-7" {
		t.Errorf("records of %q, want only u_01 and team-7", got)
	}
	// Each record says its principal was vouched for by the caller's entry, and which.
	for _, r := range e.recordsSince(start) {
		if a := r.PrincipalAuth; a == nil || *a != (api.PrincipalAuth{Method: api.PrincipalByCaller, Caller: "agent"}) {
			t.Errorf("record %s: principal_auth %+v, want by caller agent", r.RecordID, a)
		}
	}
	if n := e.metric(`verdictd_principal_refusals_total{reason="principal_not_allowed"}`); n != 4 {
		t.Errorf("principal_not_allowed refusals %v, want 4", n)
	}
}

// TestSubjectToken: a caller forwarding its user's access token acts for the token's principal
// and for no other, whatever its entry lists; a token that does not verify is refused for its
// reason, and the refused preflights leave no record.
func TestSubjectToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t), "-resource", gatewayResource,
		"-client", "agent:agent-secret", "-client", "other:other-secret=https://other.test/mcp")
	start := time.Now()
	e := newEnv(t, envOpts{mutate: func(c *Config) {
		c.Callers = []Caller{
			{Name: "gateway", TokenSHA256: httpx.HashToken(callerToken), Principals: []string{"u_01"}},
		}
		c.Identity = &identity.Config{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: gatewayResource}}}
	}})
	token := op.ClientCredentials(t, "agent", "agent-secret")
	user := op.AuthCode(t, "test-user2")
	agent, id2 := identity.PrincipalID(op.Issuer, "agent"), identity.PrincipalID(op.Issuer, "id2")
	for _, tc := range []struct {
		name, principal, subject string
		status                   int
		code                     string
	}{
		{"client credentials", agent, token, 200, ""},
		{"authorization code", id2, user, 200, ""},
		{"another principal than the token's", id2, token, 403, api.CodePrincipalNotAllowed},
		// The caller's own list does not widen what a token says.
		{"a listed principal, with a token", "u_01", token, 403, api.CodePrincipalNotAllowed},
		{"the token's principal, without the token", agent, "", 403, api.CodePrincipalNotAllowed},
		{"a token for another resource", identity.PrincipalID(op.Issuer, "other"), op.ClientCredentials(t, "other", "other-secret"),
			401, string(identity.WrongAudience)},
		{"not a token", agent, "not-a-token", 401, string(identity.TokenMalformed)},
	} {
		if status, code := e.post(callerToken, tc.principal, tc.subject); status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}
	if got := strings.Join(e.principalsRecorded(start), " "); got != agent+" "+id2 {
		t.Errorf("records of %q, want only %s and %s", got, agent, id2)
	}
	// Each record says the principal came from a verified token: its method, issuer and a hash
	// of it, never the token.
	for _, r := range e.recordsSince(start) {
		a := r.PrincipalAuth
		if a == nil || a.Method != api.PrincipalByJWT || a.Caller != "gateway" || a.Issuer != op.Issuer ||
			!strings.HasPrefix(a.TokenHash, "sha256:") || len(a.TokenHash) != len("sha256:")+64 {
			t.Errorf("record %s: principal_auth %+v, want a JWT of %s by gateway", r.RecordID, a, op.Issuer)
		}
	}
	for reason, want := range map[string]float64{api.CodePrincipalNotAllowed: 3, "wrong_audience": 1, "token_malformed": 1, "token_expired": 0} {
		if n := e.metric(`verdictd_principal_refusals_total{reason="` + reason + `"}`); n != want {
			t.Errorf("%s refusals %v, want %v", reason, n, want)
		}
	}
	op.Stop()
	// The issuer's keys are cached: a token of a known key still verifies while they are
	// fresh. A verdictd without them fails closed.
	fresh := newEnv(t, envOpts{mutate: func(c *Config) {
		c.Callers = []Caller{{Name: "gateway", TokenSHA256: httpx.HashToken(callerToken), Principals: []string{}}}
		c.Identity = &identity.Config{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: gatewayResource}}}
	}})
	if status, code := fresh.post(callerToken, agent, token); status != 503 || code != string(identity.IdPUnavailable) {
		t.Errorf("issuer down: %d %s, want 503 %s", status, code, identity.IdPUnavailable)
	}
	if n := fresh.metric(`verdictd_principal_refusals_total{reason="idp_unavailable"}`); n != 1 {
		t.Errorf("idp_unavailable refusals %v, want 1", n)
	}
}

// TestSubjectTokenWithoutIdentity: a verdictd that verifies no subject tokens refuses one
// rather than ignore it.
func TestSubjectTokenWithoutIdentity(t *testing.T) {
	e := newEnv(t, envOpts{})
	if status, code := e.post(callerToken, "u_01", "eyJ.eyJ.sig"); status != 403 || code != api.CodePrincipalNotAllowed {
		t.Errorf("%d %s, want 403 %s", status, code, api.CodePrincipalNotAllowed)
	}
}

// TestTriggerPrincipalCheckedFirst: a trigger naming a principal its caller may not act for is
// refused before its action key is looked up, so the answer is the same whether or not the key
// exists.
func TestTriggerPrincipalCheckedFirst(t *testing.T) {
	e := newEnv(t, envOpts{mutate: func(c *Config) {
		c.Callers = []Caller{
			{Name: "agent", TokenSHA256: httpx.HashToken(callerToken), Principals: []string{"u_01"}},
			{Name: "narrow", TokenSHA256: httpx.HashToken(narrowToken), Principals: []string{}},
		}
	}})
	trigger := []byte(`{"principal":"u_01","phase":"at_trigger","action_key":"u_01:pay rent:bank/transfer"}`)
	for _, tc := range []struct {
		token  string
		status int
		code   string
	}{
		{narrowToken, http.StatusForbidden, api.CodePrincipalNotAllowed},
		{callerToken, http.StatusNotFound, api.CodeUnknownActionKey},
	} {
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/preflight", bytes.NewReader(trigger))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tc.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ans api.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || ans.Error.Code != tc.code {
			t.Errorf("%s: %d %s (%v), want %d %s", tc.token, resp.StatusCode, ans.Error.Code, err, tc.status, tc.code)
		}
	}
	if n := e.metric(`verdictd_principal_refusals_total{reason="principal_not_allowed"}`); n != 1 {
		t.Errorf("principal_not_allowed refusals %v, want 1", n)
	}
}

// TestTokenForBothResources: a token whose aud names both the gateway and the approvals API
// serves as neither at a verdictd that takes subject tokens for the one and approver tokens for
// the other, while tokens for one resource each work.
func TestTokenForBothResources(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers",
		"-client", "agent:agent-secret="+gatewayResource, "-client", "both:both-secret="+gatewayResource+","+approvalsResource)
	e := newEnv(t, envOpts{policy: consolePolicy, mutate: func(c *Config) {
		c.Callers = []Caller{{Name: "gateway", TokenSHA256: httpx.HashToken(callerToken), Principals: []string{}}}
		c.Identity = &identity.Config{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: gatewayResource}}}
		c.Approvers = &Approvers{Issuers: []identity.Issuer{{Issuer: op.Issuer, Audience: approvalsResource}}}
	}})
	both := op.ClientCredentials(t, "both", "both-secret")
	agent := op.ClientCredentials(t, "agent", "agent-secret")
	approver := op.AuthCode(t, "test-user2")
	id := identity.PrincipalID(op.Issuer, "both")

	if status, code := e.post(callerToken, identity.PrincipalID(op.Issuer, "agent"), agent); status != 200 {
		t.Errorf("a subject token for the gateway: %d %s", status, code)
	}
	if status, code := e.post(callerToken, id, both); status != 401 || code != string(identity.WrongAudience) {
		t.Errorf("a subject token for both: %d %s, want 401 %s", status, code, identity.WrongAudience)
	}
	var list api.ApprovalList
	if status, code := e.approvalCall("GET", "/v1/approvals?state=pending", approver, nil, &list); status != 200 {
		t.Errorf("an approver token: %d %s", status, code)
	}
	if status, code := e.approvalCall("GET", "/v1/approvals?state=pending", both, nil, &list); status != 401 || code != api.CodeUnauthorized {
		t.Errorf("an approver token for both: %d %s, want 401 %s", status, code, api.CodeUnauthorized)
	}
}
