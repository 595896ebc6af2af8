// Package examples tests the example configs of a local stack: verdictd.yaml, executor.yaml,
// mcpgate.yaml and policy.yaml, and identity/mcpgate.yaml and identity/verdictd.yaml, the
// gateway and verdictd taking the example OpenID Provider's tokens. It keeps them from rotting: each is read by its daemon's own
// loader, together they must describe one stack that fits, and verdictd and the executor must
// start from them (keys generated the way docs/operations.md says), without any network or
// running server.
package examples

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/verdictd"
)

// The configs name paths relative to the repository root, where the stack is run; the test
// runs in examples/.
const root = ".."

// stack is the four example configs, loaded.
type stack struct {
	verdictd *verdictd.Config
	executor *executor.Config
	mcpgate  *mcpgate.Config
	policy   *policy.Policy
}

func loadStack(t *testing.T) stack {
	t.Helper()
	var s stack
	var err error
	if s.verdictd, err = verdictd.LoadConfig("verdictd.yaml"); err != nil {
		t.Fatal(err)
	}
	if s.executor, err = executor.LoadConfig("executor.yaml"); err != nil {
		t.Fatal(err)
	}
	if s.mcpgate, err = mcpgate.LoadConfig("mcpgate.yaml"); err != nil {
		t.Fatal(err)
	}
	if s.policy, err = policy.Load("policy.yaml"); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExampleConfigsLoad(t *testing.T) {
	s := loadStack(t)
	if len(s.policy.Issues) > 0 {
		t.Errorf("examples/policy.yaml has definition issues: %v", s.policy.Issues)
	}
	for name, p := range map[string]string{"verdictd.yaml policy": s.verdictd.Policy, "mcpgate.yaml policy": s.mcpgate.Policy} {
		if p != "examples/policy.yaml" {
			t.Errorf("%s is %q, want examples/policy.yaml", name, p)
		}
	}
}

// TestExampleStackFitsTogether checks every name, address and token hash one example config
// gives another.
func TestExampleStackFitsTogether(t *testing.T) {
	s := loadStack(t)
	v, x, g, p := s.verdictd, s.executor, s.mcpgate, s.policy

	// The executor runs the policy's servers, and their verdicts name it.
	for id, conn := range x.Servers {
		sv := p.Servers[id]
		if sv == nil {
			t.Errorf("executor.yaml server %q is not in policy.yaml", id)
			continue
		}
		if !slices.Contains(sv.Audience, x.ExecutorID) {
			t.Errorf("policy.yaml servers.%s.audience %v does not name executor_id %q", id, sv.Audience, x.ExecutorID)
		}
		if sv.ToolsFrom == nil || sv.ToolsFrom.URL != conn.URL {
			t.Errorf("executor.yaml servers.%s %+v is not where policy.yaml lists its tools (%+v)", id, conn, sv.ToolsFrom)
		}
		if gc, ok := g.Servers[id]; ok && gc.URL != conn.URL {
			t.Errorf("mcpgate.yaml servers.%s.url %q differs from the executor's %q", id, gc.URL, conn.URL)
		}
	}

	// Keys: each side reads the public key set the other's keygen writes beside its private key.
	if i := slices.IndexFunc(x.TrustedIssuers, func(ti executor.TrustedIssuer) bool { return ti.Issuer == v.Issuer }); i < 0 {
		t.Errorf("executor.yaml trusts %+v, not verdictd.yaml's issuer %q", x.TrustedIssuers, v.Issuer)
	} else if want := sibling(v.SigningKey, "jwks.json"); x.TrustedIssuers[i].JWKS != want {
		t.Errorf("executor.yaml reads verdictd's keys from %q, keygen writes them to %q", x.TrustedIssuers[i].JWKS, want)
	}
	if i := slices.IndexFunc(v.Executors, func(e verdictd.Executor) bool { return e.Issuer == x.ExecutorID }); i < 0 {
		t.Errorf("verdictd.yaml accepts receipts from %+v, not from executor %q", v.Executors, x.ExecutorID)
	} else if want := sibling(x.ReceiptKey, "jwks.json"); v.Executors[i].JWKS != want {
		t.Errorf("verdictd.yaml reads the executor's keys from %q, keygen writes them to %q", v.Executors[i].JWKS, want)
	}

	// Addresses and tokens: every client of a daemon reaches its listen address with a token
	// whose hash the daemon lists.
	if x.Verdictd == nil {
		t.Fatal("executor.yaml posts no receipts to verdictd")
	}
	vURL, xURL := "http://"+v.Listen, "http://"+x.Listen
	vCallers := make([]httpx.Token, len(v.Callers))
	for i, c := range v.Callers {
		vCallers[i] = httpx.Token{Name: c.Name, TokenSHA256: c.TokenSHA256}
	}
	for _, c := range []struct {
		who, url, token, want string
		callers               []httpx.Token
	}{
		{"executor.yaml verdictd", x.Verdictd.URL, x.Verdictd.Token, vURL, vCallers},
		{"mcpgate.yaml verdictd", g.Verdictd.URL, g.Verdictd.Token, vURL, vCallers},
		{"mcpgate.yaml executor", g.Executor.URL, g.Executor.Token, xURL, executor.CallerTokens(x.Callers)},
	} {
		if c.url != c.want {
			t.Errorf("%s.url is %q, want %q", c.who, c.url, c.want)
		}
		h := httpx.HashToken(c.token)
		if !slices.ContainsFunc(c.callers, func(k httpx.Token) bool { return k.TokenSHA256 == h }) {
			t.Errorf("%s.token: its SHA-256 is not among the callers it is sent to", c.who)
		}
	}
	if v.AdminTokenSHA256 != x.AdminTokenSHA256 {
		t.Error("verdictd.yaml and executor.yaml name different admin tokens; the docs audit both with one")
	}
	// Every address is loopback: the example stack serves plain HTTP.
	for _, a := range []string{v.Listen, x.Listen, g.Listen} {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("listen %q is not a loopback address", a)
		}
	}
}

// TestExampleStackStarts generates the keys as docs/operations.md does and constructs verdictd
// and the executor from the example configs, with the stack's tmp/ directory moved into the
// test's own. Neither constructor connects to anything.
func TestExampleStackStarts(t *testing.T) {
	s := loadStack(t)
	tmp := t.TempDir()
	// relocate maps a path the configs keep under tmp/ (git ignores it) into the test's
	// directory; a runtime path anywhere else fails the test.
	relocate := func(p string) string {
		t.Helper()
		rest, ok := strings.CutPrefix(p, "tmp/")
		if !ok {
			t.Fatalf("runtime path %q is not under tmp/", p)
		}
		return filepath.Join(tmp, rest)
	}
	v, x := *s.verdictd, *s.executor
	// verdictd keygen --out tmp/keys/verdictd; executor keygen --out tmp/keys/executor.
	for _, key := range []string{v.SigningKey, x.ReceiptKey} {
		if _, err := keys.Keygen(relocate(filepath.Dir(key)), keys.EdDSA); err != nil {
			t.Fatal(err)
		}
	}
	v.DataDir, v.SigningKey = relocate(v.DataDir), relocate(v.SigningKey)
	v.Policy = filepath.Join(root, v.Policy)
	for i := range v.Executors {
		v.Executors[i].JWKS = relocate(v.Executors[i].JWKS)
	}
	x.DataDir, x.ReceiptKey = relocate(x.DataDir), relocate(x.ReceiptKey)
	for i := range x.TrustedIssuers {
		x.TrustedIssuers[i].JWKS = relocate(x.TrustedIssuers[i].JWKS)
	}

	ctx := context.Background()
	vs, err := verdictd.New(ctx, v, verdictd.Options{})
	if err != nil {
		t.Fatalf("verdictd from examples/verdictd.yaml: %v", err)
	}
	if got := vs.PolicyVersion(); got != s.policy.Version {
		t.Errorf("verdictd serves policy %q, want %q", got, s.policy.Version)
	}
	if err := vs.Close(ctx); err != nil {
		t.Error(err)
	}
	xs, err := executor.New(ctx, x, executor.Options{})
	if err != nil {
		t.Fatalf("executor from examples/executor.yaml: %v", err)
	}
	if err := xs.Close(ctx); err != nil {
		t.Error(err)
	}

	// The gateway's requestState key, made as the config's comment says (32 random bytes,
	// base64), is long enough.
	keyFile := relocate(s.mcpgate.StateKeyFile)
	if err := os.WriteFile(keyFile, []byte("q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mcpgate.ReadStateKey(keyFile); err != nil {
		t.Error(err)
	}
}

// sibling is the file name beside path's file.
func sibling(path, name string) string { return filepath.Dir(path) + "/" + name }
