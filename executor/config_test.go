package executor

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/etcdx"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/upstream"
)

func TestConfigDebugListen(t *testing.T) {
	base := Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), ExecutorID: "executor-bank", ReceiptKey: "receipt.jwk",
		TrustedIssuers: []TrustedIssuer{{Issuer: "verdictd", JWKS: "jwks.json"}},
		Servers:        map[string]upstream.Config{"bank": {Command: []string{"bank"}}},
		Callers:        []Caller{{Name: "agent", TokenSHA256: httpx.HashToken("t")}},
	}
	tests := []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:6060", true},
		{"[::1]:6060", true},
		{":6060", false},
		{"0.0.0.0:6060", false},
		{"192.0.2.1:6060", false},
	}
	for _, tt := range tests {
		c := base
		c.DebugListen = tt.addr
		err := c.Validate()
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "debug_listen")) {
			t.Errorf("debug_listen %q: %v", tt.addr, err)
		}
	}
}

// nonceStoreConfig loads an executor config file whose nonce_store section is section.
func nonceStoreConfig(t *testing.T, section string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	body := `listen: 127.0.0.1:0
data_dir: ` + dir + `
executor_id: executor-bank
trusted_issuers: [{issuer: verdictd, jwks: jwks.json}]
receipt_key: receipt.jwk
servers: {bank: {command: [bank]}}
callers: [{name: gate, token_sha256: "` + strings.Repeat("ab", 32) + `"}]
nonce_store:
` + section
	p := filepath.Join(dir, "executor.yaml")
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

// TestNonceStoreSectionKeys: the shared etcd keys sit directly under nonce_store, beside kind,
// and strict decoding still refuses every key the section does not have, also the name of the
// struct that carries the etcd keys and verdictd's own state_store keys.
func TestNonceStoreSectionKeys(t *testing.T) {
	cfg, err := nonceStoreConfig(t, `  kind: etcd
  endpoints: [https://a:2379, https://b:2379]
  prefix: /prod/
  tls: {cert: c.pem, key: k.pem, ca: ca.pem, server_name: etcd}
  username: executor
  password_file: /run/pw
  dial_timeout: 3s
  request_timeout: 750ms
`)
	if err != nil {
		t.Fatal(err)
	}
	want := NonceStore{Kind: "etcd", Config: etcdx.Config{
		Endpoints: []string{"https://a:2379", "https://b:2379"}, Prefix: "/prod/",
		TLS:      &EtcdTLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem", ServerName: "etcd"},
		Username: "executor", PasswordFile: "/run/pw",
		DialTimeout: confx.Duration(3 * time.Second), RequestTimeout: confx.Duration(750 * time.Millisecond),
	}}
	if !reflect.DeepEqual(cfg.NonceStore, want) {
		t.Fatalf("nonce_store read as %+v, want %+v", cfg.NonceStore, want)
	}

	for _, tt := range []struct{ name, section, key string }{
		{"misspelt", "  kind: etcd\n  endpoints: [http://a:2379]\n  prefx: /x/\n", "prefx"},
		{"embedded struct by name", "  kind: etcd\n  Config: {endpoints: [http://a:2379]}\n", "Config"},
		{"embedded struct lower case", "  kind: etcd\n  config: {endpoints: [http://a:2379]}\n", "config"},
		{"key in another case", "  kind: etcd\n  Endpoints: [http://a:2379]\n", "Endpoints"},
		{"verdictd's ttl", "  kind: etcd\n  endpoints: [http://a:2379]\n  ttl: 1h\n", "ttl"},
		{"inside tls", "  kind: etcd\n  endpoints: [https://a:2379]\n  tls: {ca: ca.pem, crt: c.pem}\n", "crt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nonceStoreConfig(t, tt.section)
			if err == nil || !strings.Contains(err.Error(), `unknown field "`+tt.key+`"`) {
				t.Fatalf("error %v, want unknown field %q", err, tt.key)
			}
		})
	}
}

// TestNonceStoreSectionErrors pins every nonce_store problem word for word.
func TestNonceStoreSectionErrors(t *testing.T) {
	for _, tt := range []struct{ name, section, want string }{
		{"bbolt with etcd keys", "  kind: bbolt\n  prefix: /x/\n",
			"nonce_store: endpoints, prefix, tls, username, password_file and timeouts apply only to kind etcd"},
		{"no kind with a timeout", "  dial_timeout: 1s\n",
			"nonce_store: endpoints, prefix, tls, username, password_file and timeouts apply only to kind etcd"},
		{"unknown kind", "  kind: redis\n", `nonce_store.kind "redis": want bbolt or etcd`},
		{"no endpoints", "  kind: etcd\n", "nonce_store: nonce: etcd: at least one endpoint is required"},
		{"not http", "  kind: etcd\n  endpoints: [ftp://a:1]\n",
			`nonce_store: nonce: etcd: endpoint "ftp://a:1": want an http:// or https:// URL`},
		{"path", "  kind: etcd\n  endpoints: [http://a:1/v3]\n",
			`nonce_store: nonce: etcd: endpoint "http://a:1/v3": want scheme://host:port and nothing else`},
		{"mixed schemes", "  kind: etcd\n  endpoints: [https://a:1, http://b:1]\n",
			"nonce_store: nonce: etcd: endpoints mix http and https: the client would use one transport for all"},
		{"tls over http", "  kind: etcd\n  endpoints: [http://a:1]\n  tls: {ca: ca.pem}\n",
			"nonce_store: nonce: etcd: tls is set but the endpoints are http://; use https:// endpoints"},
		{"all at once", "  kind: etcd\n  tls: {cert: c.pem}\n  username: u\n",
			"nonce_store: nonce: etcd: at least one endpoint is required\n" +
				"nonce_store: username and password_file go together\n" +
				"nonce_store.tls: cert and key go together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nonceStoreConfig(t, tt.section)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v\nwant  %s", err, tt.want)
			}
		})
	}
}

// TestConfigVerdictdURL: receipts carry the verdictd token, so verdictd.url is https, or plain
// http on a loopback address only.
func TestConfigVerdictdURL(t *testing.T) {
	base := Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), ExecutorID: "executor-bank", ReceiptKey: "receipt.jwk",
		TrustedIssuers: []TrustedIssuer{{Issuer: "verdictd", JWKS: "jwks.json"}},
		Servers:        map[string]upstream.Config{"bank": {Command: []string{"bank"}}},
		Callers:        []Caller{{Name: "agent", TokenSHA256: httpx.HashToken("t")}},
	}
	tests := []struct {
		url  string
		want string // "" = valid
	}{
		{"https://verdictd.internal:8443", ""},
		{"https://10.0.0.5", ""},
		{"http://127.0.0.1:8080", ""},
		{"http://127.8.9.10:8080/", ""},
		{"http://[::1]:8080", ""},
		{"http://localhost:8080", ""},
		{"", "verdictd.url is required when verdictd is set"},
		{"http://verdictd.internal:8080", `verdictd.url "http://verdictd.internal:8080": plain http would send the verdictd token unencrypted to "verdictd.internal"; ` +
			"http is accepted for a loopback address only (127.0.0.0/8, ::1, localhost); use https"},
		{"http://10.0.0.5", "loopback address only"},
		{"http://0.0.0.0:8080", "loopback address only"},
		{"http://127.0.0.1.example.com", "loopback address only"},
		{"http://localhost.example.com", "loopback address only"},
		{"http://user:secret@verdictd.internal", `verdictd.url "http://user:xxxxx@verdictd.internal": plain http`},
		{"http://", "loopback address only"},
		{"https://", `verdictd.url "https:": no host`},
		{"ftp://verdictd.internal", `verdictd.url "ftp://verdictd.internal": want an https:// URL, or http:// on a loopback address`},
		{"verdictd.internal:8443", "want an https:// URL"},
		{"https://verdictd\x7f", "verdictd.url: "},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c := base
			c.Verdictd = &ReceiptSink{URL: tt.url, Token: "tok"}
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error quotes the URL's password: %v", err)
			}
		})
	}
}

// TestConfigClockSkew: a verdict is accepted until exp + clock_skew, so the skew is bounded:
// at most MaxClockSkew, and never negative. The default fits.
func TestConfigClockSkew(t *testing.T) {
	base := Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), ExecutorID: "executor-bank", ReceiptKey: "receipt.jwk",
		TrustedIssuers: []TrustedIssuer{{Issuer: "verdictd", JWKS: "jwks.json"}},
		Servers:        map[string]upstream.Config{"bank": {Command: []string{"bank"}}},
		Callers:        []Caller{{Name: "agent", TokenSHA256: httpx.HashToken("t")}},
	}
	tests := []struct {
		skew time.Duration
		want string // "" = valid
	}{
		{0, ""},
		{time.Second, ""},
		{DefaultClockSkew, ""},
		{30 * time.Second, ""},
		{MaxClockSkew, ""},
		{MaxClockSkew + time.Second, "clock_skew 1m1s exceeds the 1m limit: verdicts would be accepted that long past their exp, " +
			"longer than verdictd's default 60s verdict lifetime; synchronise the clocks (NTP) instead"},
		{5 * time.Minute, "clock_skew 5m0s exceeds the 1m limit"},
		{time.Hour, "clock_skew 1h0m0s exceeds the 1m limit"},
		{-time.Second, "clock_skew -1s must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.skew.String(), func(t *testing.T) {
			c := base
			c.ClockSkew = confx.Duration(tt.skew)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
		})
	}

	// From a config file, as an operator writes it.
	dir := t.TempDir()
	p := filepath.Join(dir, "executor.yaml")
	body := `listen: 127.0.0.1:0
data_dir: ` + dir + `
executor_id: executor-bank
trusted_issuers: [{issuer: verdictd, jwks: jwks.json}]
receipt_key: receipt.jwk
servers: {bank: {command: [bank]}}
callers: [{name: gate, token_sha256: "` + strings.Repeat("ab", 32) + `"}]
clock_skew: 1h
`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "clock_skew 1h0m0s exceeds the 1m limit") {
		t.Fatalf("clock_skew: 1h loaded with error %v", err)
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

// TestConfigErrorsArePlaced: a problem is reported at its file:line:col, with a "did you mean"
// for a key close to a known one.
func TestConfigErrorsArePlaced(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "executor.yaml")
	body := "listen: 127.0.0.1:0\ndata_dir: d\nexecutor_id: e\nreceipt_key: k\n" +
		"trusted_issuers: [{issuer: verdictd, jwks: jwks.json}]\nservers:\n  bank: {comand: [bank]}\n" +
		"callers: [{name: gate, token_sha256: \"" + strings.Repeat("ab", 32) + "\"}]\nnonce_store:\n  kind: etcd\n  prefx: /x/\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(p)
	want := p + `:7:10: servers.bank: unknown field "comand" (did you mean "command"?)` + "\n" +
		p + `:11:3: nonce_store: unknown field "prefx" (did you mean "prefix"?)`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// TestConfigVerdictdTokenTwice: a receipt token given both inline and in a file is refused,
// rather than one of the two being ignored.
func TestConfigVerdictdTokenTwice(t *testing.T) {
	c := Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), ExecutorID: "executor-bank", ReceiptKey: "receipt.jwk",
		TrustedIssuers: []TrustedIssuer{{Issuer: "verdictd", JWKS: "jwks.json"}},
		Servers:        map[string]upstream.Config{"bank": {Command: []string{"bank"}}},
		Callers:        []Caller{{Name: "agent", TokenSHA256: httpx.HashToken("t")}},
		Verdictd:       &ReceiptSink{URL: "https://verdictd.internal", Token: "tok", TokenFile: "tok.txt"},
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "set token or token_file, not both") {
		t.Fatalf("error %v, want token and token_file refused together", err)
	}
	c.Verdictd.Token = ""
	if err := c.Validate(); err != nil {
		t.Fatalf("token_file alone refused: %v", err)
	}
}

// TestConfigReceiptBatchDelay: verdictd.batch_delay is 0 (post what is queued at once) to 1s;
// unset is the default.
func TestConfigReceiptBatchDelay(t *testing.T) {
	base := Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), ExecutorID: "executor-bank", ReceiptKey: "receipt.jwk",
		TrustedIssuers: []TrustedIssuer{{Issuer: "verdictd", JWKS: "jwks.json"}},
		Servers:        map[string]upstream.Config{"bank": {Command: []string{"bank"}}},
		Callers:        []Caller{{Name: "agent", TokenSHA256: httpx.HashToken("t")}},
	}
	d := func(v time.Duration) *confx.Duration { c := confx.Duration(v); return &c }
	tests := []struct {
		delay *confx.Duration
		want  string
	}{
		{nil, ""},
		{d(0), ""},
		{d(time.Second), ""},
		{d(-time.Millisecond), "verdictd.batch_delay -1ms: want 0 to 1s"},
		{d(2 * time.Second), "verdictd.batch_delay 2s: want 0 to 1s"},
	}
	for _, tt := range tests {
		c := base
		c.Verdictd = &ReceiptSink{URL: "https://verdictd.internal", Token: "tok", BatchDelay: tt.delay}
		err := c.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("batch_delay %v: %v, want %q", tt.delay, err, tt.want)
		}
	}
	if got := (&ReceiptSink{}).batchDelay(); got != DefaultReceiptBatchDelay {
		t.Errorf("default %s", got)
	}
}
