// Package testbrowser starts the headless Chromium that browser tests drive through chromedp:
// Debian's chromium package (or VERDICT_CHROMIUM_BIN), a fresh profile per test, nothing
// running in the background. Without Chromium a test is skipped with the reason, or fails
// under VERDICT_CI=1 (see testtool).
package testbrowser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// Path returns the Chromium binary, skipping t (failing it under VERDICT_CI=1) when there is
// none, and skipping it under -short.
func Path(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the browser tests start Chromium and the processes it talks to")
	}
	if p := os.Getenv("VERDICT_CHROMIUM_BIN"); p != "" {
		return p
	}
	return testtool.Path(t, "chromium", "Debian package chromium, or VERDICT_CHROMIUM_BIN names another; the browser tests need it")
}

// Start starts a headless Chromium with a fresh profile and returns the context of one tab;
// the browser ends with the test.
func Start(t testing.TB) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path(t)),
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
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// Do runs steps in the tab, failing t on the first error.
func Do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// Text returns the text of the element the CSS selector sel names, once it is visible.
func Text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(sel)))
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// Eval evaluates a JavaScript expression in the page, as DevTools does (the page's
// Content-Security-Policy does not govern it).
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// Screenshot saves a PNG of the whole page as name in the directory VERDICT_SCREENSHOTS names,
// or in the test's temporary directory.
func Screenshot(t testing.TB, ctx context.Context, name string) {
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

// SignInAtOP fills the example OpenID Provider's login form (internal/testing/testop) as user with
// password and waits for the page it leads to, which shows waitFor.
func SignInAtOP(user, password, waitFor string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.WaitVisible(chromedp.CSS(`#username`)),
		chromedp.SendKeys(chromedp.CSS(`#username`), user),
		chromedp.SendKeys(chromedp.CSS(`#password`), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(waitFor)),
	}
}
