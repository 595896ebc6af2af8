package mcpgate

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
)

// TestConnectPage: the page to connect an account is shown only when it is the executor's:
// https or http on a loopback host, on the origin of the gateway's executor.url (scheme, host
// in any case, port with the scheme's default), printable and bounded.
func TestConnectPage(t *testing.T) {
	for _, tt := range []struct {
		executor, page string
		ok             bool
		origin         bool // refused as another origin's
	}{
		{"https://executor.example", "https://executor.example/connect/bank", true, false},
		{"https://executor.example:443/base/", "https://EXECUTOR.example/connect/bank", true, false},
		{"https://executor.example", "https://executor.example:443/connect/bank", true, false},
		{"http://127.0.0.1:8443", "http://127.0.0.1:8443/connect/bank", true, false},
		{"http://localhost:8443", "http://localhost:8443/connect/bank%2Fx", true, false},
		{"https://executor.example", "https://executor.example.evil/connect/bank", false, true},
		{"https://executor.example", "https://evil.example/connect/bank", false, true},
		{"https://executor.example", "https://executor.example:8443/connect/bank", false, true},
		{"http://127.0.0.1:8443", "http://127.0.0.1:8444/connect/bank", false, true},
		{"http://127.0.0.1:8443", "https://127.0.0.1:8443/connect/bank", false, true},
		{"https://executor.example", "http://executor.example/connect/bank", false, false}, // plain http off loopback
		{"https://executor.example", "javascript:alert(1)", false, false},
		{"https://executor.example", "https://user@executor.example/connect/bank", false, false},
		{"https://executor.example", "https://executor.example/connect/bank#x", false, false},
		{"https://executor.example", "https://executor.example/connect/ba nk", false, false},
		{"https://executor.example", "https://executor.example/connect/bank\u202e", false, false},
		{"https://executor.example", "https://executor.example/" + strings.Repeat("a", maxConnectURL), false, false},
		{"https://executor.example", "/connect/bank", false, false},
		// connect_pages.url: the executor reached inside, its pages outside.
		{"http://executor.internal:8443 https://executor.example", "https://executor.example/connect/bank", true, false},
		{"http://executor.internal:8443 https://executor.example", "http://executor.internal:8443/connect/bank", false, false},
		{"http://127.0.0.1:8443 https://executor.example", "https://other.example/connect/bank", false, true},
	} {
		executor, pages, _ := strings.Cut(tt.executor, " ")
		g := &Gateway{cfg: Config{Executor: Endpoint{URL: executor}}}
		if pages != "" {
			g.cfg.ConnectPages = &ConnectPages{URL: pages}
		}
		err := g.connectPage(tt.page)
		if (err == nil) != tt.ok {
			t.Errorf("%s at %s: %v, want ok %v", tt.page, tt.executor, err, tt.ok)
		}
		if got := errors.Is(err, errNotExecutorOrigin); got != tt.origin {
			t.Errorf("%s at %s: %v, want another origin's refusal %v", tt.page, tt.executor, err, tt.origin)
		}
	}
}

// The texts that ask the user to connect an account are the gateway's own wording, which a
// relayed question may not use; none of those a URL elicitation carries holds a URL.
func TestConnectWording(t *testing.T) {
	for _, s := range []string{connectAsk, connectStill, connectHidden, connectLink("https://executor.example/connect/bank")} {
		if reservedWording.In(s) == "" {
			t.Errorf("%q is not reserved", s)
		}
	}
	for _, s := range []string{connectAsk, connectStill, connectHidden, connectDeclined} {
		if strings.Contains(s, "://") {
			t.Errorf("%q holds a URL", s)
		}
	}
}

// TestConnectStateRoundTrip: a call that waits for the user's account is kept with its
// verdict and the arguments' exact bytes, and read back as it was kept.
func TestConnectStateRoundTrip(t *testing.T) {
	vc := verdictCall{RecordID: "rec_1", Verdict: "eyJ.x.y", Args: json.RawMessage(`{"amount":1000.50,"to":"110-222-333"}`)}
	st := &callState{Principal: "u_01", Exposed: "bank.transfer", ArgsDigest: "sha256:ab", Rounds: 1,
		Req:     api.Request{Principal: "u_01", Server: "bank", Tool: "transfer", ConversationID: "c1"},
		Connect: &vc, expiry: time.Unix(1_800_000_000, 0)}
	b, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Connect == nil || got.Connect.RecordID != vc.RecordID || got.Connect.Verdict != vc.Verdict || string(got.Connect.Args) != string(vc.Args) {
		t.Fatalf("decoded %+v, want %+v", got.Connect, vc)
	}
	if _, err := decodeState([]byte(`{"principal":"u_01","req":{"principal":"u_01"},"rounds":1,"expiry":1}`)); err == nil {
		t.Error("a continuation with neither a form nor a decided call was read")
	}
}

// TestConnectWait: a call waits for an account until five seconds before its verdict expires,
// at most MaxConnectWait, and not at all when the verdict's expiry does not read.
func TestConnectWait(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	jwt := func(payload string) string {
		return "eyJhbGciOiJFZERTQSJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	for _, tt := range []struct {
		tok  string
		want time.Duration
	}{
		{jwt(`{"exp":1800000060}`), 55 * time.Second},
		{jwt(`{"exp":1800003600}`), MaxConnectWait},
		{jwt(`{"exp":1800000003}`), 0},
		{jwt(`{"exp":"soon"}`), 0},
		{jwt(`{}`), 0},
		{"not.a-jwt", 0},
		{"", 0},
	} {
		if got := connectWait(tt.tok, now); got != tt.want {
			t.Errorf("connectWait(%q) = %v, want %v", tt.tok, got, tt.want)
		}
	}
}
