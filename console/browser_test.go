package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/verdictgate/verdict/internal/testop"
)

// chromium returns the Chromium binary the browser tests drive: VERDICT_CHROMIUM_BIN, else
// Debian's chromium on the PATH. Without one the tests are skipped, or fail when
// VERDICT_REQUIRE_CHROMIUM=1.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the browser tests start Chromium and an OpenID Provider")
	}
	path := os.Getenv("VERDICT_CHROMIUM_BIN")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			if os.Getenv("VERDICT_REQUIRE_CHROMIUM") == "1" {
				t.Fatal("chromium is not installed (Debian's chromium package), and VERDICT_REQUIRE_CHROMIUM=1")
			}
			t.Skip("chromium is not installed (Debian's chromium package; VERDICT_CHROMIUM_BIN names another): the console's browser tests need it")
		}
	}
	return path
}

// browser starts a headless Chromium with a fresh profile and returns a context of one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1100),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot saves a PNG of the whole page as name in VERDICT_SCREENSHOTS, or the test's
// temporary directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("VERDICT_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
}

// do runs steps in the browser, failing t on the first error.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// text returns the text of the element sel names, once it is visible.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(sel)))
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// eval evaluates a JavaScript expression in the page (DevTools' own evaluation, which the
// page's Content-Security-Policy does not govern).
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// signInAtOP fills the provider's login form as user and waits for the console page that
// follows, which shows waitFor.
func signInAtOP(user, waitFor string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.WaitVisible(chromedp.CSS(`#username`)),
		chromedp.SendKeys(chromedp.CSS(`#username`), user),
		chromedp.SendKeys(chromedp.CSS(`#password`), testop.Password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(waitFor)),
	}
}

// browserHarness is a console in front of the stubs, signing in at a real provider process.
func browserHarness(t *testing.T) (*harness, context.Context, *testop.OP) {
	ctx := browser(t)
	op := testop.Start(t, opCmd.Path(t))
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
	do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_01APPROVE"))
	do(t, ctx, signInAtOP("test-user2", `#approve`)...)
	server, tool, digest := text(t, ctx, "#server"), text(t, ctx, "#tool"), text(t, ctx, "#digest")
	memo := text(t, ctx, "pre.draft")
	screenshot(t, ctx, "approval.png")
	do(t, ctx, chromedp.Click(chromedp.CSS(`#approve`)))
	approved := text(t, ctx, "#decided")
	by := text(t, ctx, "#decided-by")

	do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_02DENY"), chromedp.Click(chromedp.CSS(`#deny`), chromedp.NodeVisible))
	denied := text(t, ctx, "#decided")

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

	do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_03OWN"))
	do(t, ctx, signInAtOP("test-user2", `#why`)...)
	why := text(t, ctx, "#why")
	disabled := eval[bool](t, ctx, `document.querySelector('#approve').disabled && document.querySelector('#deny').disabled`)
	screenshot(t, ctx, "approval-own-call.png")
	if !disabled || !strings.Contains(why, "this is your own call") || !strings.Contains(why, "self_approval") {
		t.Errorf("own call: disabled %v, reason %q", disabled, why)
	}

	do(t, ctx, chromedp.Navigate(h.srv.URL+"/approvals/apr_04OTHER"), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	if !eval[bool](t, ctx, `(document.querySelector('form[action^="/approvals/"] input[name=csrf_token]').remove(), true)`) {
		t.Fatal("the form token was not removed")
	}
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#approve`)))
	if err != nil {
		t.Fatal(err)
	}
	code, problem := text(t, ctx, "#problem-code"), text(t, ctx, ".problem")
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
	do(t, ctx, chromedp.Navigate(h.srv.URL+"/audit"))
	do(t, ctx, signInAtOP("test-user2", `#pairs`)...)
	row := eval[string](t, ctx, `[...document.querySelectorAll('#pairs tr')].find(r => r.textContent.includes('rec_02ISSUED')).textContent`)
	summary := text(t, ctx, "#summary")
	screenshot(t, ctx, "audit.png")
	if !strings.Contains(row, "exe_01RAN") || !strings.Contains(row, "executed") || !strings.Contains(row, "verdict_issued") {
		t.Errorf("the pair's row: %q", row)
	}
	if !strings.Contains(summary, "1 anomalies") {
		t.Errorf("summary %q", summary)
	}
}
