package console

import (
	"html"
	"net/http"
	"strings"
	"testing"
	"time"
)

// records fills the stub with: a paired transfer, an ask_user record, a get_balance pair, and
// an execution no decision record issued (an anomaly).
func records(t *testing.T, h *harness) time.Time {
	t0 := h.clock.Now().Add(-time.Hour)
	args := map[string]any{"to_account": "110-222-333", "amount": 900}
	h.stub.addDecision(t, "rec_01ASK", "ask_user", "", "iss#id1", "bank", "transfer", t0, args)
	h.stub.addDecision(t, "rec_02ISSUED", "verdict_issued", "vrd_1", "iss#id1", "bank", "transfer", t0.Add(time.Minute), args)
	h.stub.addExecution(t, "exe_01RAN", "vrd_1", "rec_02ISSUED", "iss#id1", "bank", "transfer", t0.Add(2*time.Minute))
	h.stub.addDecision(t, "rec_03BALANCE", "verdict_issued", "vrd_2", "iss#id2", "bank", "get_balance", t0.Add(3*time.Minute), map[string]any{})
	h.stub.addExecution(t, "exe_02BALANCE", "vrd_2", "rec_03BALANCE", "iss#id2", "bank", "get_balance", t0.Add(4*time.Minute))
	h.stub.addExecution(t, "exe_03ROGUE", "vrd_9", "rec_99", "iss#id1", "bank", "transfer", t0.Add(5*time.Minute))
	return t0
}

func TestAuditView(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	t0 := records(t, h)
	c := h.signIn("id3")
	r := h.do("GET", "/audit", c, nil, nil)
	if r.status != 200 {
		t.Fatalf("status %d\n%s", r.status, r.body)
	}
	for _, want := range []string{
		`href="/audit/records/rec_02ISSUED"`, `href="/audit/records/exe_01RAN"`, "rec_01ASK", "rec_03BALANCE",
		`id="unpaired"`, "exe_03ROGUE", "execution_without_verdict", "3 decision records, 3 execution records",
		"Argument values are masked for you",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the audit view does not show %q", want)
		}
	}
	// exe_01RAN is shown in rec_02ISSUED's row: the pairing is package audit's.
	row := rowOf(r.body, "rec_02ISSUED")
	if !strings.Contains(row, "exe_01RAN") || !strings.Contains(row, "executed") {
		t.Errorf("the pair is not one row: %s", row)
	}
	if strings.Contains(r.body, "110-222-333") {
		t.Error("the list shows an argument value")
	}

	tests := []struct {
		query      string
		shown, not []string
	}{
		{"?tool=transfer", []string{"rec_02ISSUED", "rec_01ASK"}, []string{"rec_03BALANCE"}},
		{"?principal=iss%23id2", []string{"rec_03BALANCE"}, []string{"rec_02ISSUED", "exe_03ROGUE"}},
		{"?outcome=ask_user", []string{"rec_01ASK"}, []string{"rec_02ISSUED"}},
		{"?outcome=executed&server=bank&tool=transfer", []string{"rec_02ISSUED"}, []string{"rec_01ASK", "rec_03BALANCE"}},
		{"?from=" + t0.Add(2*time.Minute).Format("2006-01-02T15:04"), []string{"rec_03BALANCE", "exe_03ROGUE"}, []string{"rec_02ISSUED", "rec_01ASK"}},
		{"?to=" + t0.Add(time.Minute).Format(time.RFC3339), []string{"rec_01ASK"}, []string{"rec_02ISSUED", "rec_03BALANCE"}},
	}
	for _, tc := range tests {
		r := h.do("GET", "/audit"+tc.query, c, nil, nil)
		table := between(r.body, `<table class="list" id="pairs">`, "</table>") + between(r.body, `id="unpaired"`, "</table>")
		for _, s := range tc.shown {
			if !strings.Contains(table, s) {
				t.Errorf("%s: %s is not shown", tc.query, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(table, s) {
				t.Errorf("%s: %s is shown", tc.query, s)
			}
		}
	}
	if r := h.do("GET", "/audit?from=yesterday", c, nil, nil); r.status != 400 || !strings.Contains(html.UnescapeString(r.body), `"yesterday" is not a time`) {
		t.Errorf("a bad time: %d", r.status)
	}
}

// TestRecordValues: a record's argument values are shown to values_groups only.
func TestRecordValues(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	records(t, h)
	for _, tc := range []struct {
		groups []string
		values bool
	}{{nil, false}, {[]string{"payments-approvers"}, false}, {[]string{"auditors"}, true}} {
		c := h.signIn("id3", tc.groups...)
		r := h.do("GET", "/audit/records/rec_02ISSUED", c, nil, nil)
		if r.status != 200 {
			t.Fatalf("status %d\n%s", r.status, r.body)
		}
		if got := strings.Contains(r.body, "110-222-333"); got != tc.values {
			t.Errorf("groups %v: values shown %v, want %v", tc.groups, got, tc.values)
		}
		if !tc.values && !strings.Contains(html.UnescapeString(r.body), `"***"`) {
			t.Errorf("groups %v: no masked value shown", tc.groups)
		}
		if !strings.Contains(r.body, `href="/audit/records/exe_01RAN"`) {
			t.Errorf("the record's execution is not listed")
		}
	}
	c := h.signIn("id3", "auditors")
	r := h.do("GET", "/audit/records/exe_01RAN", c, nil, nil)
	if r.status != 200 || strings.Contains(r.body, "eyJ.eyJ.sig") || !strings.Contains(r.body, `href="/audit/records/rec_02ISSUED"`) {
		t.Errorf("execution record: %d (the verdict token must never be shown)\n%s", r.status, r.body)
	}
	if r := h.do("GET", "/audit/records/rec_NOPE", c, nil, nil); r.status != http.StatusNotFound || !strings.Contains(r.body, codeRecordNotFound) {
		t.Errorf("unknown record: %d", r.status)
	}
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// rowOf returns the table row that holds s.
func rowOf(body, s string) string {
	i := strings.Index(body, s)
	if i < 0 {
		return ""
	}
	start := strings.LastIndex(body[:i], "<tr>")
	end := strings.Index(body[i:], "</tr>")
	if start < 0 || end < 0 {
		return ""
	}
	return body[start : i+end]
}

// TestAuditGroups: with audit_groups set, the audit view and record pages are open to their
// members and values_groups' only.
func TestAuditGroups(t *testing.T) {
	h := newHarness(t, testIssuer, func(c *Config) { c.AuditGroups = []string{"auditors-lite"} })
	records(t, h)
	for _, tc := range []struct {
		groups []string
		status int
	}{{nil, 403}, {[]string{"payments-approvers"}, 403}, {[]string{"auditors-lite"}, 200}, {[]string{"auditors"}, 200}} {
		c := h.signIn("id3", tc.groups...)
		for _, path := range []string{"/audit", "/audit/records/rec_02ISSUED"} {
			r := h.do("GET", path, c, nil, nil)
			if r.status != tc.status || (tc.status == 403 && !strings.Contains(r.body, codeNotAuditor)) {
				t.Errorf("groups %v, %s: %d, want %d", tc.groups, path, r.status, tc.status)
			}
		}
	}
}
