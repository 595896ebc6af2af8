package verdictd

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
)

// stateStoreConfig loads a verdictd config file whose state_store section is section.
func stateStoreConfig(t *testing.T, section string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	body := `listen: 127.0.0.1:0
data_dir: ` + dir + `/data
issuer: verdictd-a
signing_key: ` + dir + `/signing.jwk
policy: ` + dir + `/policy.yaml
callers: [{name: agent, token_sha256: "` + strings.Repeat("ab", 32) + `", principals: ["*"]}]
state_store:
` + section
	p := filepath.Join(dir, "verdictd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		// The problems without their places, one a line.
		return nil, errors.New(withoutPlaces(err))
	}
	return cfg, nil
}

// TestStateStoreSectionKeys: the shared etcd keys sit directly under state_store, beside kind
// and the ttls, and strict decoding still refuses every key the section does not have, also the
// name of the struct that carries the etcd keys.
func TestStateStoreSectionKeys(t *testing.T) {
	cfg, err := stateStoreConfig(t, `  kind: etcd
  endpoints: [https://a:2379, https://b:2379]
  prefix: /prod/
  tls: {cert: c.pem, key: k.pem, ca: ca.pem, server_name: etcd}
  username: verdictd
  password_file: /run/pw
  dial_timeout: 3s
  request_timeout: 500ms
  ttl: 12h
  deferred_ttl: 720h
`)
	if err != nil {
		t.Fatal(err)
	}
	want := StateStore{Kind: "etcd", Config: etcdx.Config{
		Endpoints: []string{"https://a:2379", "https://b:2379"}, Prefix: "/prod/",
		TLS:      &EtcdTLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem", ServerName: "etcd"},
		Username: "verdictd", PasswordFile: "/run/pw",
		DialTimeout: confx.Duration(3 * time.Second), RequestTimeout: confx.Duration(500 * time.Millisecond),
	}, TTL: confx.Duration(12 * time.Hour), DeferredTTL: confx.Duration(720 * time.Hour)}
	if !reflect.DeepEqual(cfg.StateStore, want) {
		t.Fatalf("state_store read as %+v, want %+v", cfg.StateStore, want)
	}

	for _, tt := range []struct{ name, section, key string }{
		{"misspelt", "  kind: etcd\n  endpoints: [http://a:2379]\n  request_timout: 1s\n", "request_timout"},
		{"embedded struct by name", "  kind: etcd\n  Config: {endpoints: [http://a:2379]}\n", "Config"},
		{"embedded struct lower case", "  kind: etcd\n  config: {endpoints: [http://a:2379]}\n", "config"},
		{"key in another case", "  kind: etcd\n  Endpoints: [http://a:2379]\n", "Endpoints"},
		{"inside tls", "  kind: etcd\n  endpoints: [https://a:2379]\n  tls: {ca: ca.pem, crt: c.pem}\n", "crt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := stateStoreConfig(t, tt.section)
			if err == nil || !strings.Contains(err.Error(), `unknown field "`+tt.key+`"`) {
				t.Fatalf("error %v, want unknown field %q", err, tt.key)
			}
		})
	}
}

// TestStateStoreSectionErrors pins every state_store problem word for word.
func TestStateStoreSectionErrors(t *testing.T) {
	const onlyEtcd = "state_store: endpoints, prefix, tls, username, password_file, timeouts and ttls apply only to kind etcd"
	for _, tt := range []struct{ name, section, want string }{
		{"bbolt with etcd keys", "  kind: bbolt\n  prefix: /x/\n", onlyEtcd},
		{"no kind with a timeout", "  dial_timeout: 1s\n", onlyEtcd},
		{"bbolt with a ttl", "  kind: bbolt\n  deferred_ttl: 1h\n", onlyEtcd},
		{"unknown kind", "  kind: etc\n", `state_store.kind "etc": want bbolt or etcd`},
		{"no endpoints", "  kind: etcd\n", "state_store: etcd: at least one endpoint is required"},
		{"not http", "  kind: etcd\n  endpoints: [ftp://a:1]\n",
			`state_store: etcd: endpoint "ftp://a:1": want an http:// or https:// URL`},
		{"path", "  kind: etcd\n  endpoints: [http://a:1/v3]\n",
			`state_store: etcd: endpoint "http://a:1/v3": want scheme://host:port and nothing else`},
		{"mixed schemes", "  kind: etcd\n  endpoints: [https://a:1, http://b:1]\n",
			"state_store: etcd: endpoints mix http and https: the client would use one transport for all"},
		{"tls over http", "  kind: etcd\n  endpoints: [http://a:1]\n  tls: {ca: ca.pem}\n",
			"state_store: etcd: tls is set but the endpoints are http://; use https:// endpoints"},
		{"ttls under 2s", "  kind: etcd\n  endpoints: [http://a:1]\n  ttl: 1s\n  deferred_ttl: 1ms\n",
			"state_store.ttl 1s is under 2s: etcd leases count whole seconds\n" +
				"state_store.deferred_ttl 1ms is under 2s: etcd leases count whole seconds"},
		{"all at once", "  kind: etcd\n  tls: {cert: c.pem}\n  password_file: /run/pw\n",
			"state_store: etcd: at least one endpoint is required\n" +
				"state_store: username and password_file go together\n" +
				"state_store.tls: cert and key go together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := stateStoreConfig(t, tt.section)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v\nwant  %s", err, tt.want)
			}
		})
	}
}

// TestConfigClockSkew: clock_skew is bounded as the executor's is: at most MaxClockSkew and
// never negative. The default fits; the messages say why, as an operator reads them.
func TestConfigClockSkew(t *testing.T) {
	tests := []struct {
		skew string // as written in the file; "" = not set
		want string // "" = valid
	}{
		{"", ""},
		{"0s", ""},
		{"1s", ""},
		{DefaultClockSkew.String(), ""},
		{"30s", ""},
		{"1m", ""},
		{"61s", "clock_skew 1m1s exceeds the 1m limit: receipts would be accepted that far ahead of verdictd's clock, " +
			"longer than the default 60s verdict lifetime; synchronise the clocks (NTP) instead"},
		{"5m", "clock_skew 5m0s exceeds the 1m limit"},
		{"1h", "clock_skew 1h0m0s exceeds the 1m limit"},
		// The file's duration parser refuses it before Validate does.
		{"-1s", `duration "-1s" is negative`},
	}
	var loaded *Config
	for _, tt := range tests {
		t.Run(tt.skew, func(t *testing.T) {
			dir := t.TempDir()
			body := `listen: 127.0.0.1:0
data_dir: ` + dir + `/data
issuer: verdictd-a
signing_key: ` + dir + `/signing.jwk
policy: ` + dir + `/policy.yaml
callers: [{name: agent, token_sha256: "` + strings.Repeat("ab", 32) + `", principals: ["*"]}]
`
			if tt.skew != "" {
				body += "clock_skew: " + tt.skew + "\n"
			}
			p := filepath.Join(dir, "verdictd.yaml")
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(p)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "" && cfg.ClockSkew.Or(DefaultClockSkew) > MaxClockSkew:
				t.Fatalf("loaded with clock_skew %s", cfg.ClockSkew.D())
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
			if err == nil {
				loaded = cfg
			}
		})
	}

	// A config built in code reaches Validate with a negative skew.
	if loaded == nil {
		t.Fatal("no config loaded")
	}
	c := *loaded
	c.ClockSkew = confx.Duration(-time.Second)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "clock_skew -1s must not be negative") {
		t.Fatalf("clock_skew -1s: %v", err)
	}
}

// configWith loads a minimal verdictd config file with extra appended (YAML lines), and returns
// its problems without their places.
func configWith(t *testing.T, extra string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	body := `listen: 127.0.0.1:0
data_dir: ` + dir + `/data
issuer: verdictd-a
signing_key: ` + dir + `/signing.jwk
policy: ` + dir + `/policy.yaml
callers: [{name: agent, token_sha256: "` + strings.Repeat("ab", 32) + `", principals: ["*"]}]
` + extra
	p := filepath.Join(dir, "verdictd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		return nil, errors.New(withoutPlaces(err))
	}
	return cfg, nil
}

// TestConfigLimits: the checklist limits and the evaluation budget default to the gate's
// bounds, may be changed, and are refused negative or past their ceilings, each problem named.
func TestConfigLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits string // the limits section; "" = none
		want   string // the problems; "" = valid
		items  int    // the checklist limits in force when valid
		expr   int
		total  int
		cost   uint64
	}{
		{"defaults", "", "", 64, 4096, 8192, 30_000},
		{"lowered", "limits: {max_checklist_items: 8, max_expression_bytes: 256, max_checklist_bytes: 1024, max_evaluation_cost: 5000}\n", "", 8, 256, 1024, 5000},
		{"at the ceilings", "limits: {max_checklist_items: 1024, max_expression_bytes: 4096, max_checklist_bytes: 65536, max_evaluation_cost: 1000000}\n", "", 1024, 4096, 65536, 1_000_000},
		{"negative", "limits: {max_checklist_items: -1}\n", "limits: values must not be negative", 0, 0, 0, 0},
		{"past the ceilings", "limits: {max_checklist_items: 5000, max_expression_bytes: 65536, max_checklist_bytes: 1048576, max_evaluation_cost: 2000000}\n",
			"limits.max_checklist_items 5000 exceeds 1024\n" +
				"limits.max_expression_bytes 65536 exceeds 4096\n" +
				"limits.max_checklist_bytes 1048576 exceeds 65536\n" +
				"limits.max_evaluation_cost 2000000 exceeds 1000000", 0, 0, 0, 0},
		{"negative cost", "limits: {max_evaluation_cost: -5}\n", "limits: values must not be negative", 0, 0, 0, 0},
		{"misspelt", "limits: {max_checklist_item: 8}\n", `unknown field "max_checklist_item"`, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := configWith(t, tt.limits)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v\nwant %s", err, tt.want)
			case tt.want != "":
				return
			}
			l := cfg.limits()
			if l.MaxChecklistItems != tt.items || l.MaxExprBytes != tt.expr || l.MaxChecklistBytes != tt.total ||
				cfg.evaluationBudget() != tt.cost {
				t.Fatalf("limits in force %+v, evaluation budget %d", l, cfg.evaluationBudget())
			}
		})
	}
}

// withoutPlaces is err's problems without the file name and position, one a line.
func withoutPlaces(err error) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var lines []string
	for _, e := range errs {
		var ce *confx.Error
		if !errors.As(e, &ce) {
			lines = append(lines, e.Error())
			continue
		}
		msg := ce.Err.Error()
		if ce.Path != "" {
			msg = ce.Path + ": " + msg
		}
		lines = append(lines, msg)
	}
	return strings.Join(lines, "\n")
}

// TestConfigErrorsArePlaced: every problem of the file is reported at its file:line:col, an
// unknown key close to a known one says which, and a syntax error names its line once, without
// a doubled "yaml:" prefix.
func TestConfigErrorsArePlaced(t *testing.T) {
	const head = "listen: 127.0.0.1:0\ndata_dir: /d\nissuer: v\nsigning_key: k\npolicy: p\n"
	tests := []struct {
		name, body string
		want       []string // after "<file>:"
	}{
		{"a misspelt key", head + "callers: [{name: agent, token_sha256: \"" + strings.Repeat("ab", 32) + "\", principals: [\"*\"]}]\nverdict_tll: 30s\n",
			[]string{`7:1: unknown field "verdict_tll" (did you mean "verdict_ttl"?)`}},
		{"nested, twice", head + "callers: [{name: agent, token_sha56: x}]\nlimits: {max_body_byte: 1}\n", []string{
			`6:25: callers[0]: unknown field "token_sha56" (did you mean "token_sha256"?)`,
			`7:10: limits: unknown field "max_body_byte" (did you mean "max_body_bytes"?)`}},
		{"validation", head + "callers: [{name: agent, token_sha256: xyz, principals: [\"*\"]}]\nclock_skew: 1h\nreceipt_algorithms: [EdDSA, HS256]\n", []string{
			`6:11: callers[0] (agent): token_sha256 must be 64 hex digits`,
			`8:29: receipt_algorithms[1]: "HS256" is not allowed (EdDSA or ES256)`,
			`7:1: clock_skew 1h0m0s exceeds the 1m limit: receipts would be accepted that far ahead of verdictd's clock, ` +
				`longer than the default 60s verdict lifetime; synchronise the clocks (NTP) instead`}},
		{"syntax", head + "callers: [{name: agent}\nverdict_ttl: 1m\n", []string{`6: did not find expected ',' or ']'`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "verdictd.yaml")
			if err := os.WriteFile(p, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(p)
			if err == nil {
				t.Fatal("loaded")
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, p+":"+w)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// TestConfigPreflightTimeout: preflight_timeout defaults to 30s and must leave the commit and
// the answer ten seconds of the write timeout.
func TestConfigPreflightTimeout(t *testing.T) {
	tests := []struct {
		value string // "" = not set
		want  string // "" = valid
		in    time.Duration
	}{
		{"", "", DefaultPreflightTimeout},
		{"500ms", "", 500 * time.Millisecond},
		{"50s", "", 50 * time.Second},
		{"51s", "preflight_timeout 51s exceeds 50s: the decision, its commit and the answer must fit in the 1m0s write timeout", 0},
		{"-1s", `duration "-1s" is negative`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			extra := ""
			if tt.value != "" {
				extra = "preflight_timeout: " + tt.value + "\n"
			}
			cfg, err := configWith(t, extra)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			case tt.want == "" && cfg.preflightTimeout() != tt.in:
				t.Fatalf("preflight_timeout in force %s", cfg.preflightTimeout())
			}
		})
	}
	cfg, err := configWith(t, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PreflightTimeout = confx.Duration(-time.Second)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "preflight_timeout -1s must not be negative") {
		t.Fatalf("negative preflight_timeout: %v", err)
	}
}

// TestConfigReceiptMaxAge: receipt_max_age defaults to DefaultReceiptMaxAge, may be set between
// a second and MaxReceiptMaxAge, and is refused outside that with its place in the file.
func TestConfigReceiptMaxAge(t *testing.T) {
	tests := []struct {
		age  string // "" = not set
		want string // "" = valid; else the problem, placed on line 7
	}{
		{"", ""},
		{"1s", ""},
		{"90s", ""},
		{"24h", ""},
		{"500ms", "7:1: receipt_max_age 500ms is under a second"},
		{"25h", "7:1: receipt_max_age 25h0m0s exceeds the 24h limit"},
	}
	for _, tt := range tests {
		t.Run(tt.age, func(t *testing.T) {
			dir := t.TempDir()
			body := `listen: 127.0.0.1:0
data_dir: ` + dir + `/data
issuer: verdictd-a
signing_key: ` + dir + `/signing.jwk
policy: ` + dir + `/policy.yaml
callers: [{name: agent, token_sha256: "` + strings.Repeat("ab", 32) + `", principals: ["*"]}]
`
			if tt.age != "" {
				body += "receipt_max_age: " + tt.age + "\n"
			}
			p := filepath.Join(dir, "verdictd.yaml")
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(p)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			case tt.want == "" && tt.age == "" && cfg.receiptMaxAge() != DefaultReceiptMaxAge:
				t.Fatalf("default receipt_max_age %s", cfg.receiptMaxAge())
			}
		})
	}
}

// TestConfigApprovers: the approvers section reads strictly, like the identity section it
// mirrors, and goes with either state store (on etcd the cluster keeps the approvals).
func TestConfigApprovers(t *testing.T) {
	const head = "listen: 127.0.0.1:0\ndata_dir: /d\nissuer: v\nsigning_key: k\npolicy: p\n" +
		"callers: [{name: agent, token_sha256: \"abababababababababababababababababababababababababababababababab\", principals: [\"*\"]}]\n"
	tests := []struct {
		name, body string
		want       []string // problems after "<file>:"; nil = loads
		claim      string
	}{
		{"default claim", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n", nil, "groups"},
		{"named claim", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n  groups_claim: roles\n", nil, "roles"},
		{"an admin group", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n  admin_group: verdict-admins\n", nil, "groups"},
		{"an admin group with white space", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n  admin_group: \" verdict-admins\"\n",
			[]string{`9:3: approvers.admin_group " verdict-admins": surrounding white space`}, ""},
		{"a misspelt key", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n  group_claim: roles\n",
			[]string{`9:3: approvers: unknown field "group_claim" (did you mean "groups_claim"?)`}, ""},
		{"the identity section's audience", head + "identity:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://gw.example/mcp\"}]\n" +
			"approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://gw.example/mcp\"}]\n",
			[]string{`10:45: approvers.issuers[0].audience "https://gw.example/mcp": the identity section accepts this issuer's tokens for the same audience; approver tokens need their own (verdictd's approvals resource), or a subject token would decide`}, ""},
		{"another principal claim than the identity section's", head + "identity:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://gw.example/mcp\", principal_claim: email}]\n" +
			"approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n",
			[]string{`10:13: approvers.issuers[0].principal_claim "sub": the identity section names this issuer's principals by "email"; four eyes compares the two, so they must be the same`}, ""},
		{"the same issuer, its own audience, the same claim", head + "identity:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://gw.example/mcp\"}]\n" +
			"approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\", principal_claim: sub}]\n", nil, "groups"},
		{"a negative max_token_lifetime", head + "approvers:\n  issuers:\n    - issuer: \"https://idp.example\"\n      audience: \"https://verdictd.example/approvals\"\n      max_token_lifetime: -1h\n",
			[]string{`11:27: approvers.issuers[0].max_token_lifetime: duration "-1h" is negative`}, ""},
		{"a max_token_lifetime that is no duration", head + "identity:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://gw.example/mcp\", max_token_lifetime: 24}]\n",
			[]string{`8:101: identity.issuers[0].max_token_lifetime: duration must be a string such as "30s", got 24`}, ""},
		{"a max_token_lifetime", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\", max_token_lifetime: 1h}]\n", nil, "groups"},
		{"with the etcd state store", head + "approvers:\n  issuers: [{issuer: \"https://idp.example\", audience: \"https://verdictd.example/approvals\"}]\n" +
			"state_store: {kind: etcd, endpoints: [\"http://127.0.0.1:2379\"]}\n",
			nil, "groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "verdictd.yaml")
			if err := os.WriteFile(p, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(p)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tt.name == "an admin group" && (!cfg.Approvers.admin(&identity.Principal{Groups: []string{"a", "verdict-admins"}}) ||
					cfg.Approvers.admin(&identity.Principal{Groups: []string{"verdict-admins-2"}})) {
					t.Error("the admin group is not the one configured")
				}
				if got := cfg.Approvers.groupsClaim(); got != tt.claim {
					t.Fatalf("groups claim %q, want %q", got, tt.claim)
				}
				return
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, p+":"+w)
			}
			if err == nil || err.Error() != strings.Join(want, "\n") {
				t.Fatalf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
			}
		})
	}
}

// TestConfigApprovalWebhooks: approval_webhooks bounds the webhook requests, defaults when
// omitted, and is refused out of its bounds or with an unknown key, at its place in the file.
func TestConfigApprovalWebhooks(t *testing.T) {
	tests := []struct {
		value         string // "" = not set
		want          string // "" = valid
		inFlight, que int
	}{
		{"", "", 0, 0}, // package approvals' defaults
		{"{in_flight: 1, queue: 1}", "", 1, 1},
		{"{in_flight: 64, queue: 4096}", "", 64, 4096},
		{"{in_flight: 65}", "approval_webhooks.in_flight 65: want from 1 to 64 (omit it for 4)", 0, 0},
		{"{queue: 4097}", "approval_webhooks.queue 4097: want from 1 to 4096 (omit it for 256)", 0, 0},
		{"{queue: -1}", "approval_webhooks.queue -1: want from 1 to 4096 (omit it for 256)", 0, 0},
		{"{inflight: 2}", "inflight", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			extra := ""
			if tt.value != "" {
				extra = "approval_webhooks: " + tt.value + "\n"
			}
			cfg, err := configWith(t, extra)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			case tt.want != "":
				t.Log(err)
			case tt.want == "" && (cfg.ApprovalWebhooks.InFlight != tt.inFlight || cfg.ApprovalWebhooks.Queue != tt.que):
				t.Fatalf("in force %d in flight, queue %d", cfg.ApprovalWebhooks.InFlight, cfg.ApprovalWebhooks.Queue)
			}
		})
	}
}
