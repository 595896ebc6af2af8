package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// credentialsConfig writes an executor config whose servers are a remote one (github) and a
// stdio one (local), with tail after them, and loads it. It returns the file's path too.
func credentialsConfig(t *testing.T, tail string) (*Config, string, error) {
	t.Helper()
	return credentialsConfigAt(t, "https://api.github.test/mcp/", tail)
}

// credentialsConfigAt is credentialsConfig with github at githubURL.
func credentialsConfigAt(t *testing.T, githubURL, tail string) (*Config, string, error) {
	t.Helper()
	dir := t.TempDir()
	body := `listen: 127.0.0.1:0
data_dir: ` + dir + `
executor_id: executor-bank
trusted_issuers: [{issuer: verdictd, jwks: jwks.json}]
receipt_key: receipt.jwk
callers: [{name: gate, token_sha256: "` + strings.Repeat("ab", 32) + `"}]
servers:
  github: {url: "` + githubURL + `", headers: {Authorization: "Bearer service-token"}}
  local: {command: [bank]}
` + tail
	p := filepath.Join(dir, "executor.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	return cfg, p, err
}

const identitySection = `identity:
  issuers:
    - {issuer: "https://idp.example.com", audience: "https://gw.example.com/mcp"}
`

// TestCredentialsConfig: a token_exchange entry with its fields loads, and a server without
// an entry, or with mode shared, is shared.
func TestCredentialsConfig(t *testing.T) {
	cfg, _, err := credentialsConfig(t, identitySection+`credentials:
  github:
    mode: token_exchange
    token_endpoint: https://idp.example.com/oauth/token
    client_id: verdict-executor
    client_secret_file: /run/credentials/verdict-executor.service/idp-secret
    audience: https://api.github.test/mcp/
    resource: https://api.github.test/mcp/
    scopes: [repo]
    subject_issuer: https://idp.example.com
  local: {mode: shared}
`)
	if err != nil {
		t.Fatal(err)
	}
	for server, want := range map[string]string{"github": api.CredentialTokenExchange, "local": api.CredentialShared, "other": api.CredentialShared} {
		if got := cfg.mode(server); got != want {
			t.Errorf("mode(%s) = %q, want %q", server, got, want)
		}
	}
	if c := cfg.Credentials["github"]; c.ClientID != "verdict-executor" || c.Scopes[0] != "repo" || c.SubjectIssuer != "https://idp.example.com" {
		t.Errorf("github read as %+v", c)
	}
}

// TestCredentialsConfigErrors pins each mistake of the credentials section, at its file, line
// and column.
func TestCredentialsConfigErrors(t *testing.T) {
	const exchange = `    mode: token_exchange
    token_endpoint: https://idp.example.com/oauth/token
    client_id: verdict-executor
    client_secret_file: /run/secret
    audience: https://api.github.test/mcp/
    subject_issuer: https://idp.example.com
`
	for _, tt := range []struct {
		name, tail, want string
	}{
		{"unknown key", identitySection + "credentials:\n  github:\n" + exchange + "    scope: [repo]\n",
			`:21:5: credentials.github: unknown field "scope" (did you mean "scopes"?)`},
		{"no such server", "credentials:\n  gitlab: {mode: shared}\n",
			`:11:3: credentials.gitlab: names no server of servers`},
		{"no mode", "credentials:\n  github: {}\n",
			`:11:3: credentials.github.mode: is required: shared, token_exchange or user_grant`},
		{"unknown mode", "credentials:\n  github: {mode: oauth}\n",
			`:11:12: credentials.github.mode: "oauth": want shared, token_exchange or user_grant`},
		{"user_grant without its fields or sections", "credentials:\n  github: {mode: user_grant}\n",
			`:11:3: credentials.github.registration: is required without client_id: configured (with client_id), dynamic or metadata_document` + "\n" +
				`:11:3: credentials.github: user_grant needs the identity section, which verifies the users' tokens that come with the verdicts` + "\n" +
				`:11:3: credentials.github: user_grant needs the vault section, where the users' grants are kept` + "\n" +
				`:11:3: credentials.github: user_grant needs the connect section, where the users connect their accounts`},
		{"shared with exchange fields", "credentials:\n  github: {mode: shared, client_id: x}\n",
			`:11:3: credentials.github: registration, authorization_server, token_endpoint, client_id, client_secret_file, audience, resource, scopes, ` +
				`subject_issuer and headers_for_users apply only to modes token_exchange and user_grant`},
		{"headers for users that carry a credential, or are not the server's", identitySection + "credentials:\n  github:\n" + exchange +
			"    headers_for_users: [authorization, X-Api-Key, X-Session-Token, Proxy-Authorization, Cookie, X-Client-Version]\n",
			`:21:25: credentials.github.headers_for_users[0]: "authorization" may carry a credential, and a user's connection sends only the user's own token; name only headers that carry no secret` + "\n" +
				`:21:40: credentials.github.headers_for_users[1]: "X-Api-Key" may carry a credential, and a user's connection sends only the user's own token; name only headers that carry no secret` + "\n" +
				`:21:51: credentials.github.headers_for_users[2]: "X-Session-Token" may carry a credential, and a user's connection sends only the user's own token; name only headers that carry no secret` + "\n" +
				`:21:68: credentials.github.headers_for_users[3]: "Proxy-Authorization" may carry a credential, and a user's connection sends only the user's own token; name only headers that carry no secret` + "\n" +
				`:21:89: credentials.github.headers_for_users[4]: "Cookie" may carry a credential, and a user's connection sends only the user's own token; name only headers that carry no secret` + "\n" +
				`:21:97: credentials.github.headers_for_users[5]: "X-Client-Version" is not a header of the server's servers entry`},
		{"token_exchange without identity", "credentials:\n  github:\n" + exchange,
			`:11:3: credentials.github: token_exchange needs the identity section, which verifies the users' tokens that come with the verdicts`},
		{"token_exchange without its fields", identitySection + "credentials:\n  github: {mode: token_exchange}\n",
			`:14:3: credentials.github.token_endpoint: is required: the identity provider's token endpoint` + "\n" +
				`:14:3: credentials.github.client_id: is required: the executor's client at the identity provider` + "\n" +
				`:14:3: credentials.github.client_secret_file: is required: the file holding the executor's client secret` + "\n" +
				`:14:3: credentials.github: audience or resource is required: the server the exchanged token is for` + "\n" +
				`:14:3: credentials.github.subject_issuer: is required: the issuer of the identity section whose users' tokens come with the verdicts`},
		{"plain http token endpoint", identitySection + "credentials:\n  github:\n" + strings.Replace(exchange, "https://idp.example.com/oauth", "http://idp.example.com/oauth", 1),
			`:16:5: credentials.github.token_endpoint: "http://idp.example.com/oauth/token" must be an https URL (http only on a loopback host): the client secret and the users' tokens are sent there`},
		{"subject issuer not in identity", identitySection + "credentials:\n  github:\n" + strings.Replace(exchange, "subject_issuer: https://idp.example.com", "subject_issuer: https://other.example.com", 1),
			`:20:5: credentials.github.subject_issuer: "https://other.example.com" is not an issuer of the identity section`},
		{"an introspecting subject issuer naming principals by email", "identity:\n  issuers:\n    - issuer: \"https://idp.example.com\"\n" +
			"      audience: \"https://gw.example.com/mcp\"\n      principal_claim: email\n" +
			"      introspection: {endpoint: \"https://idp.example.com/introspect\", client_id: gw, client_secret_file: /run/s}\n" +
			"credentials:\n  github:\n" + exchange,
			`:23:5: credentials.github.subject_issuer: "https://idp.example.com" introspects opaque tokens and names its principals by email: ` +
				`the executor could not tell whose account (sub) such a token is, which its exchanged token is kept for; use principal_claim sub, or no introspection`},
		{"stdio server", identitySection + "credentials:\n  local:\n" + exchange,
			`:14:3: credentials.local: token_exchange needs a url server: a stdio server is sent no access token`},
		{"resource with a fragment, a bad scope", identitySection + "credentials:\n  github:\n" + exchange + "    resource: \"https://api.github.test/mcp#x\"\n    scopes: [\"a b\"]\n",
			`:21:5: credentials.github.resource: "https://api.github.test/mcp#x" is not an absolute URI without a fragment (RFC 8707)` + "\n" +
				`:22:14: credentials.github.scopes[0]: "a b" is not a scope token (RFC 6749 §3.3)`},
		{"identity mistake", "identity: {issuers: [{issuer: \"ftp://idp\", audience: \"https://gw/mcp\"}]}\n",
			`:10:23: identity.issuers[0].issuer: "ftp://idp" must be an https URL (http only on a loopback host)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := credentialsConfig(t, tt.tail)
			var want []string
			for _, l := range strings.Split(tt.want, "\n") {
				want = append(want, path+l)
			}
			if err == nil || err.Error() != strings.Join(want, "\n") {
				t.Fatalf("error\n%v\nwant\n%s", err, strings.Join(want, "\n"))
			}
		})
	}
}

// TestCredentialsConfigPlainHTTP: a token_exchange server is sent the users' exchanged tokens,
// so its url is https, or http on a loopback host only; a shared server's is not held to it.
func TestCredentialsConfigPlainHTTP(t *testing.T) {
	const exchange = identitySection + `credentials:
  github:
    mode: token_exchange
    token_endpoint: https://idp.example.com/oauth/token
    client_id: verdict-executor
    client_secret_file: /run/secret
    audience: https://api.github.test/mcp/
    subject_issuer: https://idp.example.com
`
	for _, tt := range []struct {
		name, url, tail, want string
	}{
		{"token_exchange over plain http", "http://api.github.test/mcp/", exchange,
			`:8:12: servers.github.url: "http://api.github.test/mcp/" must be an https URL (http only on a loopback host): a token_exchange server is sent the users' exchanged tokens`},
		{"token_exchange over http on loopback", "http://127.0.0.1:8790/mcp", exchange, ""},
		{"token_exchange over https", "https://api.github.test/mcp/", exchange, ""},
		{"shared over plain http", "http://api.github.test/mcp/", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := credentialsConfigAt(t, tt.url, tt.tail)
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && (err == nil || err.Error() != path+tt.want):
				t.Fatalf("error\n%v\nwant\n%s", err, path+tt.want)
			}
		})
	}
}

// userGrantSections are the identity, vault and connect sections a user_grant entry needs.
const userGrantSections = identitySection + `vault:
  key_files: [/run/credentials/verdict-executor.service/vault.key]
connect:
  public_url: https://executor.example.com
  sign_in: {issuer: "https://idp.example.com", client_id: verdict-connect}
`

// TestUserGrantConfig: user_grant entries of each registration load, with the vault and connect
// sections they need.
func TestUserGrantConfig(t *testing.T) {
	cfg, _, err := credentialsConfig(t, userGrantSections+`credentials:
  github:
    mode: user_grant
    client_id: verdict-executor
    authorization_server: https://github.test/login/oauth
    scopes: [repo]
    subject_issuer: https://idp.example.com
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.mode("github"); got != api.CredentialUserGrant {
		t.Errorf("mode = %q, want user_grant", got)
	}
	if got := cfg.Credentials["github"]; got.registration() != RegistrationConfigured {
		t.Errorf("registration %q, want configured from the client_id", got.registration())
	}
	for _, reg := range []string{RegistrationDynamic, RegistrationMetadataDocument} {
		if _, _, err := credentialsConfig(t, userGrantSections+"credentials:\n  github: {mode: user_grant, registration: "+reg+
			", subject_issuer: \"https://idp.example.com\"}\n"); err != nil {
			t.Errorf("registration %s: %v", reg, err)
		}
	}
}

// TestUserGrantConfigErrors pins each mistake of a user_grant entry and of the vault and
// connect sections, at its file, line and column.
func TestUserGrantConfigErrors(t *testing.T) {
	const entry = "credentials:\n  github: {mode: user_grant, registration: dynamic, subject_issuer: \"https://idp.example.com\"}\n"
	for _, tt := range []struct {
		name, tail, want string
	}{
		{"token_exchange fields", userGrantSections + "credentials:\n  github: {mode: user_grant, client_id: c, subject_issuer: \"https://idp.example.com\", " +
			"token_endpoint: \"https://idp.example.com/token\", audience: a}\n",
			`:19:3: credentials.github: token_endpoint and audience apply only to mode token_exchange: ` +
				`a user_grant server's authorization server is found from the server's own metadata (RFC 9728)`},
		{"client of the executor's making with a client id", userGrantSections + "credentials:\n  github: {mode: user_grant, registration: dynamic, client_id: c, " +
			"client_secret_file: /run/s, subject_issuer: \"https://idp.example.com\"}\n",
			`:19:3: credentials.github: client_id and client_secret_file apply only to registration configured: with dynamic the client is the executor's own making`},
		{"configured without a client id", userGrantSections + "credentials:\n  github: {mode: user_grant, registration: configured, subject_issuer: \"https://idp.example.com\"}\n",
			`:19:3: credentials.github.client_id: is required with registration configured: the executor's client at the server's authorization server`},
		{"unknown registration", userGrantSections + "credentials:\n  github: {mode: user_grant, registration: manual, subject_issuer: \"https://idp.example.com\"}\n",
			`:19:30: credentials.github.registration: "manual": want configured, dynamic or metadata_document`},
		{"plain http authorization server", userGrantSections + "credentials:\n  github: {mode: user_grant, registration: dynamic, authorization_server: \"http://as.example.com\", " +
			"subject_issuer: \"https://idp.example.com\"}\n",
			`:19:53: credentials.github.authorization_server: "http://as.example.com" must be an https URL (http only on a loopback host): ` +
				`the users are sent there to consent, and the codes and tokens come from there`},
		{"stdio server", userGrantSections + "credentials:\n  local: {mode: user_grant, registration: dynamic, subject_issuer: \"https://idp.example.com\"}\n",
			`:19:3: credentials.local: user_grant needs a url server: a stdio server is sent no access token`},
		{"shared with user_grant fields", "credentials:\n  github: {mode: shared, registration: dynamic}\n",
			`:11:3: credentials.github: registration, authorization_server, token_endpoint, client_id, client_secret_file, audience, resource, scopes, ` +
				`subject_issuer and headers_for_users apply only to modes token_exchange and user_grant`},
		{"vault and connect with no user_grant server", userGrantSections,
			`:13:1: vault: no server is called with mode user_grant: the vault would keep nothing` + "\n" +
				`:15:1: connect: no server is called with mode user_grant: there is no account to connect`},
		{"vault and connect mistakes", identitySection + "vault: {key_files: [], max_grants_per_principal: 5000}\n" +
			"connect:\n  public_url: http://executor.example.com/?x=1\n  sign_in: {issuer: \"https://other.example.com\"}\n" + entry,
			`:13:9: vault.key_files: at least one key file is required (age-keygen -o FILE)` + "\n" +
				`:13:24: vault.max_grants_per_principal: 5000: want 1 to 1024 (0: the default, 32)` + "\n" +
				`:15:3: connect.public_url: "http://executor.example.com/?x=1" must be an https URL (http only on a loopback host): the codes of the users' grants and sign-ins are sent there` + "\n" +
				`:16:13: connect.sign_in.issuer: "https://other.example.com" is not an issuer of the identity section` + "\n" +
				`:16:3: connect.sign_in.client_id: is required: the executor's client at the identity provider`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := credentialsConfig(t, tt.tail)
			var want []string
			for _, l := range strings.Split(tt.want, "\n") {
				want = append(want, path+l)
			}
			if err == nil || err.Error() != strings.Join(want, "\n") {
				t.Fatalf("error\n%v\nwant\n%s", err, strings.Join(want, "\n"))
			}
		})
	}
}

// TestVaultStoreConfig: the vault is where the nonce store is, bbolt or etcd; vault.store may
// say so, and saying otherwise stops the load at its line: executors sharing nonces but not
// grants would each use, refresh and revoke grants of their own.
func TestVaultStoreConfig(t *testing.T) {
	const etcdNonces = "nonce_store: {kind: etcd, endpoints: [\"http://127.0.0.1:2379\"]}\n"
	section := func(store string) string {
		s := identitySection + "vault:\n  key_files: [/run/vault.key]\n"
		if store != "" {
			s += "  store: " + store + "\n"
		}
		return s + "connect:\n  public_url: https://executor.example.com\n  sign_in: {issuer: \"https://idp.example.com\", client_id: verdict-connect}\n" +
			"credentials:\n  github: {mode: user_grant, registration: dynamic, subject_issuer: \"https://idp.example.com\"}\n"
	}
	for _, tt := range []struct {
		name, tail, want string // want: the vault's store, or the error
	}{
		{"bbolt nonces", section(""), NonceStoreBolt},
		{"etcd nonces", section("") + etcdNonces, NonceStoreEtcd},
		{"bbolt said", section("bbolt"), NonceStoreBolt},
		{"etcd said", section("etcd") + etcdNonces, NonceStoreEtcd},
		{"bbolt beside etcd nonces", section("bbolt") + etcdNonces,
			`:15:3: vault.store: bbolt with nonce_store.kind etcd: each executor sharing the nonces would keep grants of its own, ` +
				`and a grant revoked at one would still be used at the others; leave store unset (the vault is in the nonce store's etcd)`},
		{"etcd beside bbolt nonces", section("etcd"),
			`:15:3: vault.store: etcd needs nonce_store.kind etcd: the vault is kept in the nonce store's cluster, through its connection keys`},
		{"unknown store", section("redis"),
			`:15:3: vault.store: "redis": want bbolt or etcd (unset: where nonce_store is)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, path, err := credentialsConfig(t, tt.tail)
			if tt.want == NonceStoreBolt || tt.want == NonceStoreEtcd {
				if err != nil {
					t.Fatal(err)
				}
				if got := cfg.vaultStore(); got != tt.want {
					t.Fatalf("the vault's store %q, want %q", got, tt.want)
				}
				return
			}
			if err == nil || err.Error() != path+tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, path+tt.want)
			}
		})
	}
}
