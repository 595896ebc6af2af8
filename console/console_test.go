package console

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/visible"
)

const (
	testIssuer = "http://127.0.0.1:9"
	digestA    = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB    = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// transfer is a pending approval of id1's bank transfer.
func transfer(h *harness, id string) stubApproval {
	now := h.clock.Now()
	return stubApproval{
		approval: approval{
			ApprovalID: id, State: api.ApprovalPending, RecordID: "rec_01TRANSFER", Principal: h.issuer + "#id1",
			Server: "bank", Tool: "transfer",
			Arguments: map[string]jsontext.Value{
				"to_account": jsontext.Value(`"110-222-333"`), "amount": jsontext.Value(`900.10`),
				"memo": jsontext.Value("\"rent \u202eKCAB\u202c\""),
			},
			ArgumentsDigest: digestA,
			Slots:           []approvalSlot{{SlotID: "confirm:amount", Question: "Send 900.10 to 110-222-333?", Value: jsontext.Value(`900.10`)}},
			Drafts:          []approvalDraft{{Field: "memo", Text: jsontext.Value(`"Rent for December,\nflat 3 <b>not bold</b>"`), Digest: "sha256:" + strings.Repeat("d", 64), Bytes: 42}},
			Notices:         []string{"The account was first seen today."},
			CreatedAt:       now, ExpiresAt: now.Add(15 * time.Minute),
		},
		FourEyes: true, Group: "payments-approvers",
		Groups: map[string][]string{h.issuer + "#id2": {"payments-approvers"}, h.issuer + "#id3": {"other"}},
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

// do sends a request as a browser on the console's own page would (Origin null under
// no-referrer, Sec-Fetch-Site same-origin), with headers overriding that.
func (h *harness) do(method, path string, c *http.Cookie, form url.Values, headers map[string]string) response {
	h.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		req.Header.Set("Origin", "null")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if c != nil {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

var hiddenDigest = regexp.MustCompile(`name="arguments_digest" value="([^"]*)"`)

// A draft, a question, a notice and a name carrying characters a person does not see (variation
// selectors, tag characters, Hangul fillers, a braille blank) are shown with every one of them
// marked, and the page counts them: nothing of what would run is drawn as nothing.
func TestApprovalPageMarksHiddenCharacters(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	a := transfer(h, "apr_02")
	payload := "December rent. Thanks!\ufe00\U000E0100\U000E0041\u3164\u2800\u034f\u115f"
	raw, err := jsonv2.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	a.Arguments["memo"] = raw
	a.Drafts = []approvalDraft{{Field: "memo\u200b", Text: raw, Digest: "sha256:" + strings.Repeat("e", 64), Bytes: int64(len(raw))}}
	a.Slots = []approvalSlot{{SlotID: "confirm:amount", Question: "Send\ufe0f 900.10?", Value: jsontext.Value(`900.10`)}}
	a.Notices = []string{"Final\U000E0020."}
	h.stub.add(a)
	c := h.signIn("id2", "payments-approvers")
	r := h.do("GET", "/approvals/apr_02", c, nil, nil)
	if r.status != 200 {
		t.Fatalf("status %d\n%s", r.status, r.body)
	}
	page := html.UnescapeString(r.body)
	for _, want := range []string{
		"December rent. Thanks!⟦U+FE00⟧⟦U+E0100⟧⟦U+E0041⟧⟦U+3164⟧⟦U+2800⟧⟦U+034F⟧⟦U+115F⟧",
		"holds 7 invisible or direction-changing", `"December rent. Thanks!\ufe00\udb40\udd00\udb40\udc41\u3164\u2800\u034f\u115f"`,
		"memo⟦U+200B⟧", "Send⟦U+FE0F⟧ 900.10?", "Final⟦U+E0020⟧.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	for _, r := range page {
		if visible.Hidden(r) && r != '\n' {
			t.Fatalf("the page draws U+%04X as is", r)
		}
	}
}

func TestSignedOutGoesToSignInAndBack(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	for _, path := range []string{"/", "/approvals/apr_01", "/audit?tool=transfer", "/audit/records/rec_1", "/connections"} {
		r := h.do("GET", path, nil, nil, nil)
		loc, _ := url.Parse(r.header.Get("Location"))
		if r.status != http.StatusSeeOther || loc.Path != "/login" || loc.Query().Get("return") != path {
			t.Errorf("GET %s signed out: %d to %s", path, r.status, loc)
		}
	}
}

func TestApprovalPageShowsWhatWouldRun(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	h.stub.add(transfer(h, "apr_01"))
	c := h.signIn("id2", "payments-approvers")
	r := h.do("GET", "/approvals/apr_01", c, nil, nil)
	if r.status != 200 {
		t.Fatalf("status %d\n%s", r.status, r.body)
	}
	page := html.UnescapeString(r.body)
	for _, want := range []string{
		`<code id="server">bank</code>`, `<code id="tool">transfer</code>`, testIssuer + "#id1", "rec_01TRANSFER",
		`"110-222-333"`, `900.10`, `"rent \u202eKCAB\u202c"`, "Holds 2 invisible or direction-changing",
		"Rent for December,\nflat 3 <b>not bold</b>", "The account was first seen today.", "Send 900.10 to 110-222-333?",
		h.clock.Now().Add(15 * time.Minute).Format("2006-01-02 15:04:05 UTC"), "payments-approvers",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	// The draft's markup is text, never markup.
	if strings.Contains(r.body, "<b>not bold</b>") || strings.Contains(r.body, "\u202e") {
		t.Error("the draft reached the page unescaped, or a direction override reached it as is")
	}
	if m := hiddenDigest.FindStringSubmatch(r.body); m == nil || m[1] != digestA {
		t.Errorf("the form carries digest %v, want %s", m, digestA)
	}
	if strings.Contains(r.body, "disabled") {
		t.Error("the buttons are disabled for an approver who may decide")
	}
	_, gets := h.stub.sent()
	if len(gets) == 0 || gets[len(gets)-1] != "Bearer "+fakeToken(testIssuer, "id2") {
		t.Errorf("verdictd was asked with %q, want the approver's own token", gets)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q on a page with values", r.header.Get("Cache-Control"))
	}
}

// TestDecidedNoteIsVerdictds: the note "You approved this call." is shown only to the approver
// verdictd names as the one who decided, never because a link says so.
func TestDecidedNoteIsVerdictds(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	h.stub.add(transfer(h, "apr_01"))
	c := h.signIn("id2", "payments-approvers")
	for _, q := range []string{"?decided=approve", "?decided=deny"} {
		if r := h.do("GET", "/approvals/apr_01"+q, c, nil, nil); strings.Contains(r.body, `id="decided"`) {
			t.Errorf("a pending approval shows the decided note for %s", q)
		}
	}
	h.do("POST", "/approvals/apr_01", c, url.Values{"csrf_token": {h.csrf(c)}, "decision": {"deny"}, "arguments_digest": {digestA}}, nil)
	if r := h.do("GET", "/approvals/apr_01?decided=approve", c, nil, nil); strings.Contains(r.body, `id="decided"`) {
		t.Error("a denied approval shows \"You approved\"")
	}
	if r := h.do("GET", "/approvals/apr_01?decided=deny", h.signIn("id3", "payments-approvers"), nil, nil); strings.Contains(r.body, `id="decided"`) {
		t.Error("another approver is told they denied it")
	}
	if r := h.do("GET", "/approvals/apr_01?decided=deny", c, nil, nil); !strings.Contains(r.body, `id="decided"`) {
		t.Error("the approver who denied is not told so")
	}
}

func TestPendingList(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	c := h.signIn("id1")
	if r := h.do("GET", "/", c, nil, nil); r.status != 200 || !strings.Contains(r.body, "No approvals are pending.") {
		t.Errorf("empty list: %d\n%s", r.status, r.body)
	}
	h.stub.add(transfer(h, "apr_01"))
	r := h.do("GET", "/", c, nil, nil)
	if r.status != 200 || !strings.Contains(r.body, `href="/approvals/apr_01"`) || !strings.Contains(r.body, "Four eyes") {
		t.Errorf("list: %d\n%s", r.status, r.body)
	}
}

// TestNoRoleSeesNothing: verdictd lists nothing to an approver without a role for an
// approval and answers its id as unknown; the console shows exactly that, and nothing of the
// call.
func TestNoRoleSeesNothing(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	h.stub.add(transfer(h, "apr_01"))
	c := h.signIn("id3", "other")
	if r := h.do("GET", "/", c, nil, nil); r.status != 200 || !strings.Contains(r.body, "No approvals are pending.") || strings.Contains(r.body, "apr_01") {
		t.Errorf("list: %d\n%s", r.status, r.body)
	}
	r := h.do("GET", "/approvals/apr_01", c, nil, nil)
	if r.status != 404 || !strings.Contains(r.body, `<code id="problem-code">not_found</code>`) || strings.Contains(r.body, "110-222-333") {
		t.Errorf("page: %d\n%s", r.status, r.body)
	}
}

// TestDecide: the approver's decision reaches verdictd with the approver's own token and the
// digest the page showed; every refusal is shown in words with its code, and verdictd is asked
// only when the form is the console's own.
func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		approver string
		groups   []string
		decision string
		edit     func(a *stubApproval) // the approval as verdictd holds it, before the page
		setup    func(h *harness)
		status   int
		code     string // "" for a decision taken
		words    string
		disabled bool // the page shows the buttons disabled
	}{
		{name: "approve", approver: "id2", groups: []string{"payments-approvers"}, decision: "approve", status: 303},
		{name: "deny", approver: "id2", groups: []string{"payments-approvers"}, decision: "deny", status: 303},
		{name: "own call under four eyes", approver: "id1", groups: []string{"payments-approvers"}, decision: "approve",
			status: 403, code: "self_approval", words: "this is your own call", disabled: true},
		{name: "own call, not in the group", approver: "id1", decision: "approve", edit: func(a *stubApproval) { a.FourEyes = false },
			status: 403, code: "approver_not_in_group", words: `not in the group "payments-approvers"`, disabled: true},
		{name: "values changed", approver: "id2", groups: []string{"payments-approvers"}, decision: "approve",
			setup:  func(h *harness) { h.stub.setDigest("apr_01", digestB) },
			status: 409, code: "approval_value_mismatch", words: "The values have changed"},
		{name: "approval expired", approver: "id2", groups: []string{"payments-approvers"}, decision: "approve",
			setup:  func(h *harness) { h.clock.Add(16 * time.Minute) },
			status: 410, code: "approval_expired", words: "expired before it was decided"},
		{name: "access token expired", approver: "id2", groups: []string{"payments-approvers"}, decision: "approve",
			setup:  func(h *harness) { h.clock.Add(61 * time.Minute) },
			status: 401, code: codeTokenExpired, words: "Your sign-in has expired"},
		{name: "decided by another meanwhile", approver: "id2", groups: []string{"payments-approvers"}, decision: "deny",
			setup: func(h *harness) {
				h.stub.mu.Lock()
				h.stub.approvals["apr_01"].State = api.ApprovalApproved
				h.stub.mu.Unlock()
			},
			status: 409, code: "already_decided", words: "already been decided"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testIssuer, nil)
			a := transfer(h, "apr_01")
			if tc.edit != nil {
				tc.edit(&a)
			}
			h.stub.add(a)
			c := h.signIn(tc.approver, tc.groups...)
			page := h.do("GET", "/approvals/apr_01", c, nil, nil)
			if got := strings.Contains(page.body, "disabled"); got != tc.disabled {
				t.Errorf("buttons disabled %v, want %v", got, tc.disabled)
			}
			if tc.disabled && !strings.Contains(html.UnescapeString(page.body), tc.words) {
				t.Errorf("the page does not say why: %q", tc.words)
			}
			shown := hiddenDigest.FindStringSubmatch(page.body)[1]
			if tc.setup != nil {
				tc.setup(h)
			}
			r := h.do("POST", "/approvals/apr_01", c, url.Values{
				"csrf_token": {h.csrf(c)}, "decision": {tc.decision}, "arguments_digest": {shown},
			}, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d\n%s", r.status, tc.status, r.body)
			}
			posts, _ := h.stub.sent()
			if tc.code == codeTokenExpired {
				if len(posts) != 0 {
					t.Errorf("an expired token was sent: %+v", posts)
				}
			} else if len(posts) != 1 || posts[0].Authorization != "Bearer "+fakeToken(testIssuer, tc.approver) ||
				posts[0].Digest != shown || posts[0].Decision != tc.decision {
				t.Errorf("verdictd got %+v, want the approver's token and digest %s", posts, shown)
			}
			if tc.code == "" {
				if loc := r.header.Get("Location"); loc != "/approvals/apr_01?decided="+tc.decision {
					t.Errorf("redirected to %q", loc)
				}
				after := h.do("GET", "/approvals/apr_01?decided="+tc.decision, c, nil, nil)
				if !strings.Contains(after.body, `id="decided"`) || !strings.Contains(after.body, testIssuer+"#"+tc.approver) {
					t.Errorf("the page after the decision does not say it:\n%s", after.body)
				}
				return
			}
			body := html.UnescapeString(r.body)
			if !strings.Contains(body, `<code id="problem-code">`+tc.code+`</code>`) || !strings.Contains(body, tc.words) {
				t.Errorf("the refusal is not shown in words with its code %s:\n%s", tc.code, r.body)
			}
		})
	}
}

// TestFormsAreTheConsolesOwn: a POST without the session's form token, from another origin,
// or outside a session is refused before verdictd hears of it.
func TestFormsAreTheConsolesOwn(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	h.stub.add(transfer(h, "apr_01"))
	c := h.signIn("id2", "payments-approvers")
	other := h.signIn("id3", "payments-approvers")
	good := func() url.Values {
		return url.Values{"csrf_token": {h.csrf(c)}, "decision": {"approve"}, "arguments_digest": {digestA}}
	}
	without := func(k string) url.Values { v := good(); v.Del(k); return v }
	with := func(k, val string) url.Values { v := good(); v.Set(k, val); return v }
	tests := []struct {
		name    string
		cookie  *http.Cookie
		form    url.Values
		headers map[string]string
		status  int
		code    string
	}{
		{"no form token", c, without("csrf_token"), nil, 403, codeCSRF},
		{"wrong form token", c, with("csrf_token", "x"+h.csrf(c)[1:]), nil, 403, codeCSRF},
		{"another session's form token", c, with("csrf_token", h.csrf(other)), nil, 403, codeCSRF},
		{"form token in the query only", c, without("csrf_token"), nil, 403, codeCSRF},
		{"another origin", c, good(), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}, 403, codeOrigin},
		{"cross-site fetch", c, good(), map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}, 403, codeOrigin},
		{"same-site but another origin", c, good(), map[string]string{"Origin": "", "Sec-Fetch-Site": "same-site"}, 403, codeOrigin},
		{"no origin at all", c, good(), map[string]string{"Origin": "", "Sec-Fetch-Site": ""}, 403, codeOrigin},
		{"no session", nil, good(), nil, 401, codeSessionEnded},
		{"bad decision", c, with("decision", "maybe"), nil, 400, codeBadForm},
		{"bad digest", c, with("arguments_digest", "sha256:xyz"), nil, 400, codeBadForm},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := "/approvals/apr_01"
			if tc.name == "form token in the query only" {
				path += "?csrf_token=" + h.csrf(c)
			}
			r := h.do("POST", path, tc.cookie, tc.form, tc.headers)
			if r.status != tc.status || !strings.Contains(r.body, `<code id="problem-code">`+tc.code+`</code>`) {
				t.Errorf("status %d, want %d with %s\n%s", r.status, tc.status, tc.code, r.body)
			}
		})
	}
	if posts, _ := h.stub.sent(); len(posts) != 0 {
		t.Errorf("verdictd was sent %+v", posts)
	}
	// The origin spelled out is as good as the same-origin fetch.
	r := h.do("POST", "/approvals/apr_01", c, good(), map[string]string{"Origin": h.srv.URL, "Sec-Fetch-Site": ""})
	if r.status != http.StatusSeeOther {
		t.Errorf("a POST from the console's own origin: %d\n%s", r.status, r.body)
	}
}

func TestLogout(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	c := h.signIn("id2")
	if r := h.do("POST", "/logout", c, url.Values{}, nil); r.status != 403 {
		t.Errorf("logout without the form token: %d", r.status)
	}
	r := h.do("POST", "/logout", c, url.Values{"csrf_token": {h.csrf(c)}}, nil)
	if r.status != 200 || !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %d, Set-Cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
	if r := h.do("GET", "/", c, nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("the session lives on after logout: %d", r.status)
	}
}

func TestSecurityHeaders(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	c := h.signIn("id2")
	for _, tc := range []struct {
		method, path string
		cookie       *http.Cookie
	}{
		{"GET", "/", c}, {"GET", "/", nil}, {"GET", "/approvals/apr_nope", c}, {"GET", "/audit", c},
		{"GET", "/nowhere", nil}, {"GET", "/healthz", nil}, {"POST", "/approvals/apr_01", c}, {"GET", "/callback?state=x", nil},
		{"GET", "/connections", c}, {"POST", "/connections/bank/revoke", c},
	} {
		r := h.do(tc.method, tc.path, tc.cookie, url.Values{}, nil)
		for k, want := range map[string]string{
			"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"Cache-Control":           "no-store",
		} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s %s: %s %q, want %q", tc.method, tc.path, k, got, want)
			}
		}
	}
	r := h.do("GET", "/static/console.css", nil, nil, nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %s", r.status, r.header.Get("Content-Type"))
	}
}

// TestCallbackRefusesStrangers: a callback whose state this browser did not start is refused
// without a word to the provider.
func TestCallbackRefusesStrangers(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	for name, tc := range map[string]struct {
		query  string
		cookie *http.Cookie
	}{
		"no state":            {"?code=x", nil},
		"no cookie":           {"?code=x&state=abc", nil},
		"cookie of another":   {"?code=x&state=abc", &http.Cookie{Name: h.console.loginCookie.name, Value: "abd"}},
		"state never started": {"?code=x&state=abc", &http.Cookie{Name: h.console.loginCookie.name, Value: "abc"}},
	} {
		r := h.do("GET", "/callback"+tc.query, tc.cookie, nil, nil)
		if r.status != 400 || !strings.Contains(r.body, codeSignInExpired) {
			t.Errorf("%s: %d\n%s", name, r.status, r.body)
		}
	}
}

// TestMetrics: decisions and refused forms are counted by code, never by who or what; a code
// verdictd made up is counted as other.
func TestMetrics(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	h.stub.add(transfer(h, "apr_01"))
	c := h.signIn("id2", "payments-approvers")
	own := h.signIn("id1", "payments-approvers")
	form := func(c *http.Cookie) url.Values {
		return url.Values{"csrf_token": {h.csrf(c)}, "decision": {"approve"}, "arguments_digest": {digestA}}
	}
	h.do("POST", "/approvals/apr_01", c, url.Values{"decision": {"approve"}}, nil)
	h.do("POST", "/approvals/apr_01", own, form(own), nil)
	h.do("POST", "/approvals/apr_01", c, form(c), nil)
	r := h.do("GET", "/metrics", nil, nil, nil)
	for _, want := range []string{
		`console_decisions_total{decision="approve",result="decided"} 1`,
		`console_decisions_total{decision="approve",result="self_approval"} 1`,
		`console_decisions_total{decision="deny",result="approval_value_mismatch"} 0`,
		`console_form_refusals_total{code="csrf_token_invalid"} 1`,
		`console_form_refusals_total{code="origin_mismatch"} 0`,
		`console_sign_ins_total{result="ok"} 0`,
		`console_sessions 2`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(r.body, "id2") || strings.Contains(r.body, "apr_01") {
		t.Error("a metric names a subject or an approval")
	}
	h.console.metrics.decided("deny", "made_up_by_verdictd")
	if r := h.do("GET", "/metrics", nil, nil, nil); !strings.Contains(r.body, `console_decisions_total{decision="deny",result="other"} 1`) {
		t.Error("an unknown code was not counted as other")
	}
}
