package examples

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/verdictd"
)

// TestIdentityExampleConfigs: examples/identity/mcpgate.yaml and examples/identity/verdictd.yaml
// load, take the tokens of one issuer issued for one resource, which is the gateway's own URL,
// fit the rest of the example stack, and verdictd starts from its config.
func TestIdentityExampleConfigs(t *testing.T) {
	g, err := mcpgate.LoadConfig("identity/mcpgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := verdictd.LoadConfig("identity/verdictd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := loadStack(t)
	if g.Identity == nil || v.Identity == nil {
		t.Fatal("an identity example without an identity section")
	}
	if want := "http://" + g.Listen + "/mcp"; g.Identity.Resource != want {
		t.Errorf("mcpgate resource %q, want its own endpoint %q", g.Identity.Resource, want)
	}
	if len(g.Identity.Issuers) != 1 || len(v.Identity.Issuers) != 1 {
		t.Fatalf("issuers: mcpgate %d, verdictd %d; want one each", len(g.Identity.Issuers), len(v.Identity.Issuers))
	}
	gi, vi := g.Identity.Issuers[0], v.Identity.Issuers[0]
	if gi.Issuer != vi.Issuer || gi.Audience != g.Identity.Resource || vi.Audience != g.Identity.Resource {
		t.Errorf("mcpgate takes %s for %s, verdictd %s for %s; want one issuer, for %s", gi.Issuer, gi.Audience, vi.Issuer, vi.Audience, g.Identity.Resource)
	}
	for id, p := range g.Principals {
		if p.TokenSHA256 != "" {
			t.Errorf("principals[%q] has a token hash beside identity", id)
		}
	}
	// The gateway is a caller of verdictd that names no principal itself: the forwarded token does.
	h := httpx.HashToken(g.Verdictd.Token)
	i := slices.IndexFunc(v.Callers, func(c verdictd.Caller) bool { return c.TokenSHA256 == h })
	if i < 0 {
		t.Fatal("identity/mcpgate.yaml's verdictd token is not among identity/verdictd.yaml's callers")
	}
	if p := v.Callers[i].Principals; p == nil || len(p) != 0 {
		t.Errorf("the gateway's callers entry lists principals %v, want []", p)
	}
	for name, got := range map[string]string{"policy": v.Policy, "listen": v.Listen, "signing_key": v.SigningKey} {
		want := map[string]string{"policy": s.verdictd.Policy, "listen": s.verdictd.Listen, "signing_key": s.verdictd.SigningKey}[name]
		if got != want {
			t.Errorf("identity/verdictd.yaml %s %q, examples/verdictd.yaml %q", name, got, want)
		}
	}
	if g.Verdictd != s.mcpgate.Verdictd || g.Executor != s.mcpgate.Executor {
		t.Error("identity/mcpgate.yaml reaches verdictd or the executor otherwise than examples/mcpgate.yaml")
	}

	// verdictd starts from it: its identity section is checked, and no issuer is reached yet.
	tmp := t.TempDir()
	if _, err := keys.Keygen(filepath.Join(tmp, "verdictd"), keys.EdDSA); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Keygen(filepath.Join(tmp, "executor"), keys.EdDSA); err != nil {
		t.Fatal(err)
	}
	cfg := *v
	cfg.DataDir = filepath.Join(tmp, "data")
	cfg.SigningKey = filepath.Join(tmp, "verdictd", filepath.Base(v.SigningKey))
	cfg.Policy = filepath.Join(root, v.Policy)
	for i := range cfg.Executors {
		cfg.Executors[i].JWKS = filepath.Join(tmp, "executor", filepath.Base(cfg.Executors[i].JWKS))
	}
	ctx := context.Background()
	vs, err := verdictd.New(ctx, cfg, verdictd.Options{})
	if err != nil {
		t.Fatalf("verdictd from examples/identity/verdictd.yaml: %v", err)
	}
	if err := vs.Close(ctx); err != nil {
		t.Error(err)
	}
}
