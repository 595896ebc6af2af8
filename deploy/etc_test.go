package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/console"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/release"
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

// consoleCredentials is where verdict-console.service's credentials are, as its config names
// them.
const consoleCredentials = "/run/credentials/verdict-console.service/"

// TestPackagedConsoleConfigLoads reads the console's packaged config with the console's own
// loader, which opens every file the config names: the unit's credentials stand in a directory
// of the test's for consoleCredentials, so that the config loads exactly when it names the
// credentials the unit loads, and no other file. It checks that the config listens on the
// port the release gives the console, and ships fail-closed: the audit view for a group, argument
// values for nobody.
func TestPackagedConsoleConfigLoads(t *testing.T) {
	dir := t.TempDir()
	for _, c := range directives(t, "verdict-console.service")["LoadCredential"] {
		name, _, _ := strings.Cut(c, ":")
		if err := os.WriteFile(filepath.Join(dir, name), []byte("placeholder\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join("etc", "console.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(consoleCredentials)) {
		t.Fatalf("etc/console.yaml names no file under %s", consoleCredentials)
	}
	path := filepath.Join(t.TempDir(), "console.yaml")
	if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(consoleCredentials), []byte(dir+"/")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := console.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"oidc.client_secret_file", c.OIDC.ClientSecretFile, filepath.Join(dir, "client.secret")},
		{"verdictd.read_token_file", c.Verdictd.ReadTokenFile, filepath.Join(dir, "verdictd.token")},
		{"executor.read_token_file", c.Executor.ReadTokenFile, filepath.Join(dir, "executor.token")},
		{"listen", c.Listen, "127.0.0.1:" + strconv.Itoa(consoleDaemon(t).Port)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if len(c.AuditGroups) == 0 || len(c.ValuesGroups) > 0 {
		t.Errorf("audit_groups %q, values_groups %q: want the audit view for a group, values for nobody", c.AuditGroups, c.ValuesGroups)
	}
}

// consoleDaemon is the console as the release ships it.
func consoleDaemon(t *testing.T) release.Daemon {
	t.Helper()
	for _, d := range release.Daemons {
		if d.Command == "verdict-console" {
			return d
		}
	}
	t.Fatal("the release ships no verdict-console")
	return release.Daemon{}
}
