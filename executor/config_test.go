package executor

import (
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/upstream"
)

func TestConfigDebugListen(t *testing.T) {
	base := Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), ExecutorID: "executor-bank", ReceiptKey: "receipt.jwk",
		TrustedIssuers: []TrustedIssuer{{Issuer: "verdictd", JWKS: "jwks.json"}},
		Servers:        map[string]upstream.Config{"bank": {Command: []string{"bank"}}},
		Callers:        []httpx.Token{{Name: "agent", TokenSHA256: httpx.HashToken("t")}},
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
