package console

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/verdictgate/verdict/internal/testing/testbrowser"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// browserHarness is a console in front of the stubs, signing in at a real provider process.
func browserHarness(t *testing.T, opArgs ...string) (*harness, context.Context, *testop.OP) {
	ctx := testbrowser.Start(t)
	op := testop.Start(t, opCmd.Path(t), opArgs...)
	h := newHarness(t, op.Issuer, func(c *Config) { c.OIDC.Scopes = []string{"profile", "email"} })
	return h, ctx, op
}

// TestBrowserApproveAndDeny: an approver opens the link the gateway gives, signs in at the
// provider, comes back to the approval, reviews it and approves; then denies another. verdictd
// gets each decision with the approver's own access token and the digest the page showed.
func TestBrowserApproveAndDeny(t *testing.T) {
	h, ctx, op := browserHarness(t)
	for _, id := range []string{"apr_01APPROVE", "apr_02DENY"} {
		a := transfer(h, id)
		a.Principal = op.Issuer + "#id1"
		a.Groups = map[string][]string{op.Issuer + "#id2": {"payments-approvers"}}
		h.stub.add(a)
	}
	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_01APPROVE"))
	testbrowser.Do(t, ctx, testbrowser.SignInAtOP("test-user2", testop.Password, `#approve`)...)
	server, tool, digest := testbrowser.Text(t, ctx, "#server"), testbrowser.Text(t, ctx, "#tool"), testbrowser.Text(t, ctx, "#digest")
	memo := testbrowser.Text(t, ctx, "pre.draft")
	testbrowser.Screenshot(t, ctx, "approval.png")
	testbrowser.Do(t, ctx, chromedp.Click(chromedp.CSS(`#approve`)))
	approved := testbrowser.Text(t, ctx, "#decided")
	by := testbrowser.Text(t, ctx, "#decided-by")

	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_02DENY"), chromedp.Click(chromedp.CSS(`#deny`), chromedp.NodeVisible))
	denied := testbrowser.Text(t, ctx, "#decided")

	if server != "bank" || tool != "transfer" || digest != digestA || !strings.Contains(memo, "flat 3 <b>not bold</b>") {
		t.Errorf("the page showed %q %q %q, memo %q", server, tool, digest, memo)
	}
	if approved != "You approved this call." || denied != "You denied this call." || by != op.Issuer+"#id2" {
		t.Errorf("after the decisions: %q (by %q), %q", approved, by, denied)
	}
	posts, _ := h.stub.sent()
	if len(posts) != 2 {
		t.Fatalf("verdictd got %d decisions, want 2: %+v", len(posts), posts)
	}
	for i, want := range []struct{ id, decision string }{{"apr_01APPROVE", "approve"}, {"apr_02DENY", "deny"}} {
		p := posts[i]
		if who, ok := bearerSubject(p.Authorization); !ok || who != op.Issuer+"#id2" || p.ID != want.id || p.Decision != want.decision || p.Digest != digestA {
			t.Errorf("decision %d: %+v (approver %q), want %s of %s by %s#id2 on %s", i, p, who, want.decision, want.id, op.Issuer, digestA)
		}
	}
}

// TestBrowserOwnCallAndForgedForm: the principal's own four-eyes call shows its buttons disabled
// with the reason; a form whose CSRF token was removed is refused with 403 and reaches no one.
func TestBrowserOwnCallAndForgedForm(t *testing.T) {
	h, ctx, op := browserHarness(t)
	own := transfer(h, "apr_03OWN")
	own.Principal = op.Issuer + "#id2"
	own.Groups = map[string][]string{op.Issuer + "#id2": {"payments-approvers"}}
	h.stub.add(own)
	other := transfer(h, "apr_04OTHER")
	other.Principal = op.Issuer + "#id1"
	other.Groups = own.Groups
	h.stub.add(other)

	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_03OWN"))
	testbrowser.Do(t, ctx, testbrowser.SignInAtOP("test-user2", testop.Password, `#why`)...)
	why := testbrowser.Text(t, ctx, "#why")
	disabled := testbrowser.Eval[bool](t, ctx, `document.querySelector('#approve').disabled && document.querySelector('#deny').disabled`)
	testbrowser.Screenshot(t, ctx, "approval-own-call.png")
	if !disabled || !strings.Contains(why, "this is your own call") || !strings.Contains(why, "self_approval") {
		t.Errorf("own call: disabled %v, reason %q", disabled, why)
	}

	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_04OTHER"), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	if !testbrowser.Eval[bool](t, ctx, `(document.querySelector('form[action^="/approvals/"] input[name=csrf_token]').remove(), true)`) {
		t.Fatal("the form token was not removed")
	}
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#approve`)))
	if err != nil {
		t.Fatal(err)
	}
	code, problem := testbrowser.Text(t, ctx, "#problem-code"), testbrowser.Text(t, ctx, ".problem")
	if resp.Status != 403 || code != codeCSRF || !strings.Contains(problem, "form token") {
		t.Errorf("forged form: %d, code %q, %q", resp.Status, code, problem)
	}
	if posts, _ := h.stub.sent(); len(posts) != 0 {
		t.Errorf("verdictd was sent %+v", posts)
	}
}

// TestBrowserAudit: an auditor signs in and reads the audit view, where a decision record and
// the execution paired with it are one row.
func TestBrowserAudit(t *testing.T) {
	h, ctx, _ := browserHarness(t)
	records(t, h)
	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/audit"))
	testbrowser.Do(t, ctx, testbrowser.SignInAtOP("test-user2", testop.Password, `#pairs`)...)
	row := testbrowser.Eval[string](t, ctx, `[...document.querySelectorAll('#pairs tr')].find(r => r.textContent.includes('rec_02ISSUED')).textContent`)
	summary := testbrowser.Text(t, ctx, "#summary")
	// Every field has its label, every button a name, and the page one h1.
	if !testbrowser.Eval[bool](t, ctx, `[...document.querySelectorAll('input:not([type=hidden]),select')].every(e => e.labels.length > 0) &&
		[...document.querySelectorAll('button')].every(b => b.textContent.trim() !== '') &&
		document.querySelectorAll('h1').length === 1`) {
		t.Error("a field without a label, a button without a name, or not one h1")
	}
	testbrowser.Screenshot(t, ctx, "audit.png")
	if !strings.Contains(row, "exe_01RAN") || !strings.Contains(row, "executed") || !strings.Contains(row, "verdict_issued") {
		t.Errorf("the pair's row: %q", row)
	}
	if !strings.Contains(summary, "1 anomalies") {
		t.Errorf("summary %q", summary)
	}
}

// TestBrowserValuesGroups: the groups come from the provider's ID token; a member of
// values_groups reads a record's argument values, and the audit view still shows none.
func TestBrowserValuesGroups(t *testing.T) {
	h, ctx, _ := browserHarness(t, "-group", "id2=auditors")
	records(t, h)
	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/audit/records/rec_02ISSUED"))
	testbrowser.Do(t, ctx, testbrowser.SignInAtOP("test-user2", testop.Password, "#record-json")...)
	record, masking := testbrowser.Text(t, ctx, "#record-json"), testbrowser.Text(t, ctx, "#masking")
	testbrowser.Screenshot(t, ctx, "record.png")
	if !strings.Contains(record, "110-222-333") || !strings.Contains(masking, "shown") {
		t.Errorf("an auditor of values_groups: %q\n%s", masking, record)
	}
	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS("#pairs")))
	if page := testbrowser.Eval[string](t, ctx, `document.body.textContent`); strings.Contains(page, "110-222-333") {
		t.Error("the audit view shows an argument value")
	}
}

// TestBrowserConnections: a user signs in, opens their connected accounts, and revokes one with
// its button; the executor is asked for that user's grant alone, and the page says what the
// authorization server answered.
func TestBrowserConnections(t *testing.T) {
	ctx := testbrowser.Start(t)
	op := testop.Start(t, opCmd.Path(t))
	h := newHarness(t, op.Issuer, func(c *Config) {
		c.ConnectURL, c.ConnectServers = "https://executor.example/base", []string{"bank", "linear"}
	})
	for _, sub := range []string{"id1", "id2"} {
		h.stub.addGrant(grantOf(h, sub, "bank", true))
		h.stub.addGrant(grantOf(h, sub, "github", false))
	}
	testbrowser.Do(t, ctx, chromedp.Navigate(h.srv.URL+"/connections"))
	testbrowser.Do(t, ctx, testbrowser.SignInAtOP("test-user2", testop.Password, `#connections`)...)
	testbrowser.Screenshot(t, ctx, "connections.png")
	testbrowser.Do(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/connections/github/revoke"] button`)))
	note, upstream := testbrowser.Text(t, ctx, "#revoked"), testbrowser.Text(t, ctx, "#revoked-upstream")
	page := testbrowser.Eval[string](t, ctx, `document.documentElement.outerHTML`)
	if !strings.Contains(note, "github") || !strings.Contains(note, "revoked the grant") || upstream != "revoked" {
		t.Errorf("after the revocation: %q (%q)", note, upstream)
	}
	if strings.Contains(page, `action="/connections/github/revoke"`) || !strings.Contains(page, `action="/connections/bank/revoke"`) {
		t.Error("the list after the revocation still shows github, or lost bank")
	}
	for _, secret := range []string{accessSecret, refreshSecret, clientSecret} {
		if strings.Contains(page, secret) {
			t.Errorf("the page holds %s", secret)
		}
	}
	own, calls := h.stub.grantsOf(op.Issuer + "#id2")
	other, _ := h.stub.grantsOf(op.Issuer + "#id1")
	if !slices.Equal(own, []string{"bank"}) || len(other) != 2 || !slices.Contains(calls, "DELETE "+op.Issuer+"#id2 github") {
		t.Errorf("grants left: id2 %v, id1 %v; the executor was asked %q", own, other, calls)
	}
}
