package agentts_test

import (
	"slices"
	"testing"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/verdictd"
)

// TestExampleConfigsFit loads the example's four configs with the daemons' own strict loaders
// and checks that they describe one stack: addresses, tokens and the bank's URL agree, and the
// policy has no definition issues. It needs neither node nor a running process, so the configs
// cannot rot where the scenarios are skipped.
func TestExampleConfigsFit(t *testing.T) {
	v, err := verdictd.LoadConfig("verdictd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.LoadConfig("executor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := mcpgate.LoadConfig("mcpgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load("policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Issues) > 0 {
		t.Errorf("policy.yaml has definition issues: %v", p.Issues)
	}
	const policyPath = "examples/agent-ts/policy.yaml"
	if v.Policy != policyPath || g.Policy != policyPath {
		t.Errorf("verdictd reads %q and mcpgate %q, want %s", v.Policy, g.Policy, policyPath)
	}

	bank := p.Servers["bank"]
	if bank == nil || bank.ToolsFrom == nil {
		t.Fatal("policy.yaml declares no bank with tools_from")
	}
	if x.Servers["bank"].URL != bank.ToolsFrom.URL || g.Servers["bank"].URL != bank.ToolsFrom.URL {
		t.Errorf("the bank is at %q for the executor and %q for mcpgate, %q in the policy",
			x.Servers["bank"].URL, g.Servers["bank"].URL, bank.ToolsFrom.URL)
	}
	if !slices.Contains(bank.Audience, x.ExecutorID) {
		t.Errorf("the bank's audience %v does not name the executor %q", bank.Audience, x.ExecutorID)
	}

	hashes := func(ts []httpx.Token) []string {
		var out []string
		for _, c := range ts {
			out = append(out, c.TokenSHA256)
		}
		return out
	}
	var vHashes []string
	for _, c := range v.Callers {
		vHashes = append(vHashes, c.TokenSHA256)
	}
	for _, c := range []struct {
		who, url, want, token string
		hashes                []string
	}{
		{"mcpgate → verdictd", g.Verdictd.URL, "http://" + v.Listen, g.Verdictd.Token, vHashes},
		{"mcpgate → executor", g.Executor.URL, "http://" + x.Listen, g.Executor.Token, hashes(executor.CallerTokens(x.Callers))},
		{"executor → verdictd", x.Verdictd.URL, "http://" + v.Listen, x.Verdictd.Token, vHashes},
	} {
		if c.url != c.want {
			t.Errorf("%s: %q, want %q", c.who, c.url, c.want)
		}
		if !slices.Contains(c.hashes, httpx.HashToken(c.token)) {
			t.Errorf("%s: the token's SHA-256 is not among the callers", c.who)
		}
	}
	for principal, token := range map[string]string{"u_01": userToken, "u_02": carefulToken} {
		if g.Principals[principal].TokenSHA256 != httpx.HashToken(token) {
			t.Errorf("mcpgate.yaml: %s's token hash is not the example token's", principal)
		}
	}
	if v.AdminTokenSHA256 != httpx.HashToken(adminToken) || x.AdminTokenSHA256 != v.AdminTokenSHA256 {
		t.Error("the admin token hashes are not the example admin token's")
	}
}
