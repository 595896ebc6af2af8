package deploy

import (
	"path/filepath"
	"testing"

	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/mcpgate"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/verdictd"
)

// zeroHash is the hash the packaged configs give every token: no token hashes to it, so a
// config installed and not yet edited accepts nobody.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// TestPackagedConfigsLoad reads the configs the packages install with the daemons' own loaders,
// and checks that they fit the units: keys and tokens from the units' credentials, state in the
// units' state directories.
func TestPackagedConfigsLoad(t *testing.T) {
	v, err := verdictd.LoadConfig(filepath.Join("etc", "verdictd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.LoadConfig(filepath.Join("etc", "executor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := mcpgate.LoadConfig(filepath.Join("etc", "mcpgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(filepath.Join("etc", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Issues) > 0 {
		t.Errorf("etc/policy.yaml has definition issues: %v", p.Issues)
	}
	checks := []struct{ name, got, want string }{
		{"verdictd signing_key", v.SigningKey, "/run/credentials/verdictd.service/signing.jwk"},
		{"verdictd data_dir", v.DataDir, "/var/lib/verdictd"},
		{"verdictd policy", v.Policy, "/etc/verdict/policy.yaml"},
		{"executor receipt_key", x.ReceiptKey, "/run/credentials/verdict-executor.service/receipt.jwk"},
		{"executor data_dir", x.DataDir, "/var/lib/verdict-executor"},
		{"executor verdictd.token_file", x.Verdictd.TokenFile, "/run/credentials/verdict-executor.service/verdictd.token"},
		{"mcpgate state_key_file", g.StateKeyFile, "/run/credentials/mcpgate.service/state.key"},
		{"mcpgate policy", g.Policy, "/etc/verdict/policy.yaml"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	for _, c := range v.Callers {
		if c.TokenSHA256 != zeroHash {
			t.Errorf("verdictd caller %s has a token hash someone may know", c.Name)
		}
	}
	for _, c := range x.Callers {
		if c.TokenSHA256 != zeroHash {
			t.Errorf("executor caller %s has a token hash someone may know", c.Name)
		}
	}
	for id, pr := range g.Principals {
		if pr.TokenSHA256 != zeroHash {
			t.Errorf("mcpgate principal %s has a token hash someone may know", id)
		}
	}
	for id := range x.Servers {
		if p.Servers[id] == nil {
			t.Errorf("executor server %q is not in the packaged policy", id)
		}
	}
}
