package console

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/confx"
)

// writeConfig writes a config whose token files exist, with {{dir}} standing for their
// directory, and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"verdictd.token", "executor.token", "client.secret"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "console.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(body, "{{dir}}", dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodConfig = `listen: 127.0.0.1:8790
public_url: http://127.0.0.1:8790
oidc:
  issuer: http://127.0.0.1:9998
  client_id: native
  scopes: [profile]
verdictd:
  url: http://127.0.0.1:8787
  read_token_file: {{dir}}/verdictd.token
executor:
  url: http://127.0.0.1:8788
  read_token_file: {{dir}}/executor.token
`

func TestLoadConfig(t *testing.T) {
	c, err := LoadConfig(writeConfig(t, goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.SignIn.max() != DefaultMaxSignIns || c.SignIn.maxPerClient() != DefaultMaxSignInsPerClient {
		t.Errorf("sign-in bounds: %d in all, %d per client", c.SignIn.max(), c.SignIn.maxPerClient())
	}
	c, err = LoadConfig(writeConfig(t, goodConfig+"connect_url: https://executor.example.org/base\nconnect_servers: [bank, git_hub-2]\n"))
	if err != nil || c.ConnectURL != "https://executor.example.org/base" || len(c.ConnectServers) != 2 || c.OIDC.principalClaim() != "sub" {
		t.Fatalf("connect_url and connect_servers: %v %+v", err, c)
	}
	c, err = LoadConfig(writeConfig(t, goodConfig+"session:\n  store:\n    kind: etcd\n    endpoints: [http://127.0.0.1:2379]\n    prefix: /team-a/\n"))
	if err != nil || c.Session.Store.Kind != SessionStoreEtcd || c.Session.Store.Prefix != "/team-a/" {
		t.Fatalf("session.store: %v %+v", err, c.Session.Store)
	}
	if c.Session.ttl() != DefaultSessionTTL || c.Session.idle() != DefaultIdleTimeout || c.OIDC.groupsClaim() != "groups" {
		t.Errorf("defaults: ttl %s idle %s groups %q", c.Session.ttl(), c.Session.idle(), c.OIDC.groupsClaim())
	}
}

func TestConfigProblems(t *testing.T) {
	tests := []struct {
		name, replace, with string
		want                []string // each in the error, with its place
	}{
		{"unknown key", "  scopes: [profile]\n", "  scopes: [profile]\n  scope: [x]\n",
			[]string{`console.yaml:7:3: oidc: unknown field "scope" (did you mean "scopes"?)`}},
		{"public url plain http elsewhere", "public_url: http://127.0.0.1:8790", "public_url: http://console.example.org",
			[]string{"console.yaml:2:1:", "loopback host only"}},
		{"public url with a path", "public_url: http://127.0.0.1:8790", "public_url: https://example.org/console",
			[]string{"console.yaml:2:1:", "the origin alone"}},
		{"verdictd in clear", "url: http://127.0.0.1:8787", "url: http://verdictd.internal:8787",
			[]string{"console.yaml:8:3:", "verdictd.url", "tokens in clear"}},
		{"token file missing", "{{dir}}/executor.token", "/nonexistent/token",
			[]string{"console.yaml:12:3:", "executor.read_token_file"}},
		{"bad duration", "executor:\n", "session:\n  ttl: 30\nexecutor:\n",
			[]string{"console.yaml:11:8:", "duration must be a string"}},
		{"ttl too long", "executor:\n", "session:\n  ttl: 48h\nexecutor:\n",
			[]string{"console.yaml:11:3:", "exceeds 24h0m0s"}},
		{"idle longer than ttl", "executor:\n", "session:\n  ttl: 1h\n  idle_timeout: 2h\nexecutor:\n",
			[]string{"console.yaml:12:3:", "idle_timeout 2h0m0s exceeds"}},
		{"debug listen public", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\ndebug_listen: 0.0.0.0:6060\n",
			[]string{"console.yaml:2:1:", "only a loopback address"}},
		{"bad scope", "scopes: [profile]", `scopes: ["a b"]`,
			[]string{"console.yaml:6:12:", "not a scope token"}},
		{"empty values group", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\nvalues_groups: [auditors, '']\n",
			[]string{"console.yaml:2:27:", "values_groups[1] is empty"}},
		{"negative sign-in bound", "executor:\n", "sign_in:\n  max_in_progress: -1\nexecutor:\n",
			[]string{"console.yaml:11:3:", "sign_in.max_in_progress must not be negative"}},
		{"per client above the whole", "executor:\n", "sign_in:\n  max_in_progress: 10\n  max_per_client: 11\nexecutor:\n",
			[]string{"console.yaml:12:3:", "sign_in.max_per_client 11 exceeds sign_in.max_in_progress 10"}},
		{"per client above the default whole", "executor:\n", "sign_in:\n  max_per_client: 10001\nexecutor:\n",
			[]string{"console.yaml:11:3:", "exceeds sign_in.max_in_progress 10000"}},
		{"listen without port", "listen: 127.0.0.1:8790", "listen: 127.0.0.1",
			[]string{"console.yaml:1:1:", "missing port"}},
		{"principal claim with white space", "  scopes: [profile]\n", "  scopes: [profile]\n  principal_claim: ' email'\n",
			[]string{"console.yaml:7:3:", "oidc.principal_claim", "surrounding white space"}},
		{"connect url plain http elsewhere", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\nconnect_url: http://executor.example.org\n",
			[]string{"console.yaml:2:1:", "connect_url", "http only on a loopback host"}},
		{"connect url with a query", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\nconnect_url: https://executor.example.org/?x=1\n",
			[]string{"console.yaml:2:1:", "has a query"}},
		{"connect servers without a url", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\nconnect_servers: [bank]\n",
			[]string{"console.yaml:2:1:", "connect_servers needs connect_url"}},
		{"connect server not a server id", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\nconnect_url: https://executor.example.org\nconnect_servers: [bank, 'a/b']\n",
			[]string{"console.yaml:3:25:", `connect_servers[1] "a/b" is not a server id`}},
		{"session store kind misspelt", "executor:\n", "session:\n  store:\n    kind: etdc\nexecutor:\n",
			[]string{"console.yaml:12:5:", `session.store.kind "etdc": want memory or etcd`}},
		{"session store etcd keys on memory", "executor:\n", "session:\n  store:\n    endpoints: [http://127.0.0.1:2379]\nexecutor:\n",
			[]string{"console.yaml:11:3:", "apply only to kind etcd"}},
		{"session store etcd without endpoints", "executor:\n", "session:\n  store:\n    kind: etcd\nexecutor:\n",
			[]string{"console.yaml:11:3:", "session.store: etcd: at least one endpoint is required"}},
		{"session store etcd mixed schemes", "executor:\n", "session:\n  store:\n    kind: etcd\n    endpoints: [http://a:2379, https://b:2379]\nexecutor:\n",
			[]string{"console.yaml:13:5:", "mix http and https"}},
		{"session store password without user", "executor:\n", "session:\n  store:\n    kind: etcd\n    endpoints: [http://a:2379]\n    password_file: /x\nexecutor:\n",
			[]string{"console.yaml:11:3:", "username and password_file go together"}},
		{"session store unknown key", "executor:\n", "session:\n  store:\n    kind: etcd\n    endpoint: [http://a:2379]\nexecutor:\n",
			[]string{"console.yaml:13:5:", `unknown field "endpoint"`}},
		{"connect server twice", "listen: 127.0.0.1:8790\n", "listen: 127.0.0.1:8790\nconnect_url: https://executor.example.org\nconnect_servers: [bank, bank]\n",
			[]string{"console.yaml:3:25:", `connect_servers[1] "bank" is named twice`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodConfig, tc.replace) {
				t.Fatalf("%q is not in the config", tc.replace)
			}
			_, err := LoadConfig(writeConfig(t, strings.Replace(goodConfig, tc.replace, tc.with, 1)))
			if err == nil {
				t.Fatal("loaded")
			}
			var ce *confx.Error
			if !errors.As(err, &ce) {
				t.Errorf("%v is not a *confx.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to hold %q", err, w)
				}
			}
		})
	}
}

func TestConfigRequired(t *testing.T) {
	_, err := LoadConfig(writeConfig(t, "listen: 127.0.0.1:1\n"))
	for _, w := range []string{"public_url is required", "oidc.issuer is required", "oidc.client_id is required",
		"verdictd.url is required", "executor.read_token_file is required"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\nwant it to hold %q", err, w)
		}
	}
}
