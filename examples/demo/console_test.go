package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/verdictgate/verdict/console"
	"github.com/verdictgate/verdict/internal/testing/testbin"
	"github.com/verdictgate/verdict/internal/testing/testbrowser"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

// opCmd is the example OpenID Provider, built once for the console's test.
var opCmd = testbin.New(testop.Package)

// approvalsResource is the audience of approver tokens verdictd's approvers section expects.
const approvalsResource = "http://verdictd.test/approvals"

// consoleRule sends bank/transfer's approvals to the console: someone else than the principal,
// of payments-approvers, approves.
const consoleRule = `    notices: ["Transfers are final."]
    approval: {channels: [console], four_eyes: true, group: payments-approvers, timeout: 10m}
`

// pendingApproval makes the transfer preflight of principal in conversation, answering every
// question of the user's (the recipient, the memo's review) and none of the approvals, until
// verdictd holds a pending console approval of the call. It returns the request with its
// answers and the approval's id.
func (d *demo) pendingApproval(t *testing.T, principal, conversation string) (map[string]any, string) {
	t.Helper()
	req, _ := transferRequest(conversation)
	req["principal"] = principal
	var answers []map[string]any
	for range 6 {
		if len(answers) > 0 {
			req["user_answers"] = answers
		}
		rec, err := d.preflight(req)
		if err != nil {
			t.Fatal(err)
		}
		if rec["outcome"] != "ask_user" {
			t.Fatalf("outcome %v, want ask_user until the approval: %v", rec["outcome"], rec)
		}
		if a, ok := rec["approval"].(map[string]any); ok && a["state"] == "pending" && a["approval_id"] != nil {
			return req, a["approval_id"].(string)
		}
		qs, _ := rec["questions"].([]any)
		for _, q := range qs {
			q := q.(map[string]any)
			switch q["kind"] {
			case "review_draft":
				answers = append(answers, map[string]any{"question_id": q["question_id"], "approved": true, "value": q["value"]})
			case "approval":
			default:
				v, ok := user[q["slot_id"].(string)]
				if !ok {
					t.Fatalf("no answer for %v", q["slot_id"])
				}
				answers = append(answers, map[string]any{"question_id": q["question_id"], "value": v})
			}
		}
	}
	t.Fatal("no pending approval after six rounds")
	return nil, ""
}

// TestConsoleApprovalEndToEnd: verdictd, the executor and the bank run as processes, with a
// policy that sends transfers' approvals to the console (four eyes, payments-approvers). A
// transfer of test-user's waits for an approval; test-user2 opens its page in Chromium, signs
// in at the OpenID Provider and approves; the next preflight of the call gets the verdict and
// the executor runs it, once. test-user2's own transfer shows its buttons disabled, and a
// decision forced through anyway is refused by verdictd (self_approval).
func TestConsoleApprovalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack, an OpenID Provider and Chromium")
	}
	ctx := testbrowser.Start(t)
	op := testop.Start(t, opCmd.Path(t), "-resource", approvalsResource, "-group", "id2=payments-approvers")
	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	d.stdio = true
	d.verdictdExtra = map[string]any{"approvers": map[string]any{
		"issuers": []map[string]any{{"issuer": op.Issuer, "audience": approvalsResource}}}}
	d.editPolicy = func(p []byte) []byte {
		return bytes.Replace(p, []byte("    notices: [\"Transfers are final.\"]\n"), []byte(consoleRule), 1)
	}
	startTestStack(t, d)

	// The console, in this process, in front of the real daemons.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(adminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	cfg := console.Config{
		Listen: "127.0.0.1:0", PublicURL: srv.URL,
		OIDC:     console.OIDC{Issuer: op.Issuer, ClientID: testop.NativeClientID, Scopes: []string{"profile"}},
		Verdictd: console.Upstream{URL: d.verdictd, ReadTokenFile: tokenFile},
		Executor: console.Upstream{URL: d.executor, ReadTokenFile: tokenFile},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := console.New(context.Background(), cfg, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	handler = c.Handler()

	req, id := d.pendingApproval(t, op.Issuer+"#id1", "c_console_1")
	testbrowser.Do(t, ctx, chromedp.Navigate(srv.URL+"/approvals/"+id))
	testbrowser.Do(t, ctx, testbrowser.SignInAtOP("test-user2", testop.Password, "#approve")...)
	if got := testbrowser.Text(t, ctx, "#principal"); got != op.Issuer+"#id1" {
		t.Errorf("the page shows principal %q", got)
	}
	testbrowser.Screenshot(t, ctx, "e2e-approval.png")
	testbrowser.Do(t, ctx, chromedp.Click(chromedp.CSS("#approve")))
	if got := testbrowser.Text(t, ctx, "#decided"); got != "You approved this call." {
		t.Fatalf("after approving: %q", got)
	}

	rec, err := d.preflight(req)
	if err != nil {
		t.Fatal(err)
	}
	if rec["outcome"] != "verdict_issued" {
		t.Fatalf("the preflight after the approval: outcome %v\n%v", rec["outcome"], rec)
	}
	approvedBy := ""
	for _, s := range rec["slots"].([]any) {
		s := s.(map[string]any)
		if s["source"] == "console_approval" {
			approvedBy, _ = s["approved_by"].(string)
		}
	}
	if approvedBy != op.Issuer+"#id2" {
		t.Errorf("no slot settled by console_approval with approved_by %s#id2: %v", op.Issuer, rec["slots"])
	}
	if status, code := d.execute(t, rec["verdict"].(string), rec["call_arguments"]); status != 200 || code != "executed" {
		t.Fatalf("execute: %d %s", status, code)
	}
	if n := d.transfers(t); n != 1 {
		t.Errorf("the bank saw %d transfers, want 1", n)
	}

	// test-user2's own transfer: four eyes.
	_, own := d.pendingApproval(t, op.Issuer+"#id2", "c_console_2")
	testbrowser.Do(t, ctx, chromedp.Navigate(srv.URL+"/approvals/"+own))
	why := testbrowser.Text(t, ctx, "#why")
	if !strings.Contains(why, "self_approval") || !testbrowser.Eval[bool](t, ctx, `document.querySelector('#approve').disabled`) {
		t.Errorf("own call: %q", why)
	}
	testbrowser.Screenshot(t, ctx, "e2e-own-call.png")
	// Forced through anyway, verdictd refuses it.
	testbrowser.Eval[bool](t, ctx, `(document.querySelector('#approve').disabled = false, true)`)
	testbrowser.Do(t, ctx, chromedp.Click(chromedp.CSS("#approve")))
	if code := testbrowser.Text(t, ctx, "#problem-code"); code != "self_approval" {
		t.Errorf("a forced self-approval: %q", code)
	}
	if n := d.transfers(t); n != 1 {
		t.Errorf("the bank saw %d transfers, want 1", n)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	opCmd.Remove()
	os.Exit(code)
}
