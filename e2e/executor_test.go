package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdictgate/verdict/upstream"
)

// TestSlowKeySetOfOneIssuerDoesNotHoldAnother posts a valid verdict of a healthy issuer to an
// executor that also trusts an issuer whose JWKS endpoint stops answering after the first
// fetch. The verdict must not wait for the other issuer's key server.
func TestSlowKeySetOfOneIssuerDoesNotHoldAnother(t *testing.T) {
	c := newExecConfig(t)
	slowKeys := newIssuer(t, c.dir, slowIssuer)
	jwks, err := os.ReadFile(slowKeys.jwks)
	if err != nil {
		t.Fatal(err)
	}
	slow := newSlowJWKS(t, jwks, 0) // held until release, or until the fetcher gives up
	abandoned := make(chan struct{})
	go func() {
		// The handler returns without answering only when the executor's fetch gave up.
		<-slow.waiting
		<-slow.abandoned
		close(abandoned)
	}()
	c.write(t, map[string]string{"issuer": slowIssuer, "jwks": slow.srv.URL})
	startExecutor(t, c)
	tsd := toolDigest(t, c.addr, "bank", "transfer")

	tok, _ := c.issuer.sign(t, tsd, []byte(defaultArgs))
	done := make(chan response, 1)
	go func() {
		done <- newClient(c.addr, callerToken, time.Minute).do(context.Background(), http.MethodPost, "/v1/execute", executeBody(tok, []byte(defaultArgs)))
	}()
	select {
	case r := <-done:
		if r.status != http.StatusOK {
			t.Fatalf("valid verdict: %d %v %s", r.status, r.err, r.body)
		}
	case <-abandoned:
		r := <-done
		t.Fatalf("verifying a verdict of issuer %q waited until the executor gave up fetching issuer %q's key set; "+
			"answer after the wait: %d", issuerID, slowIssuer, r.status)
	}
}

// TestExecuteBeforeCatalogListed posts a valid verdict to an executor whose upstream has not yet
// answered tools/list. Nothing is known about the tool yet, so the only honest answer is
// "not now" (503), and the verdict must stay usable.
func TestExecuteBeforeCatalogListed(t *testing.T) {
	c := newExecConfig(t)
	// The bank starts listing only after a pause: the executor is up, its catalog empty.
	c.bankArgs = nil
	c.write(t)
	bank := []string{"/bin/sh", "-c", `sleep 3; exec "$0" "$@"`, bins["bank"], "--state", filepath.Join(c.dir, "bank.json"), "--log", c.bankLog}
	rewriteServer(t, c.path, bank)

	tsd := directDigest(t, c.dir)
	tok, _ := c.issuer.sign(t, tsd, []byte(defaultArgs))
	d := startDaemonHealthy(t, bins["executor"], c.addr, filepath.Join(c.dir, "executor.log"), "serve", "--config", c.path)
	cl := newClient(c.addr, callerToken, time.Minute)
	r := cl.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(tok, []byte(defaultArgs)))
	early := r
	waitReady(t, d)
	if r := cl.do(context.Background(), http.MethodPost, "/v1/execute", executeBody(tok, []byte(defaultArgs))); r.status != http.StatusOK {
		t.Fatalf("the verdict once the catalog is listed: %d %s", r.status, r.body)
	}
	switch {
	case early.status == http.StatusOK:
		t.Log("the catalog was listed before the first request; nothing to check")
	case early.status != http.StatusServiceUnavailable:
		t.Fatalf("before the catalog is listed: %d %s, want 503", early.status, early.body)
	}
}

// rewriteServer points the config file's bank server at argv.
func rewriteServer(t *testing.T, path string, argv []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mustUnmarshal(t, b)
	cfg["servers"] = map[string]any{"bank": map[string]any{"command": argv}}
	writeJSON(t, path, cfg)
}

// directDigest lists the bank's tools itself and returns transfer's tsd.
func directDigest(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	cl, err := upstream.Dial(ctx, "bank", upstream.Config{Command: []string{bins["bank"], "--state", filepath.Join(dir, "direct.json")}}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tools, err := cl.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Name == "transfer" {
			return tl.Digest
		}
	}
	t.Fatal("bank lists no transfer tool")
	return ""
}

// startDaemonHealthy starts a daemon and waits for /healthz only: it may not be ready.
func startDaemonHealthy(t *testing.T, bin, addr, logPath string, args ...string) *daemon {
	t.Helper()
	d := spawn(t, bin, addr, logPath, args...)
	waitPath(t, d, "/healthz", logPath)
	return d
}

func waitReady(t *testing.T, d *daemon) {
	t.Helper()
	waitPath(t, d, "/readyz", "")
}
