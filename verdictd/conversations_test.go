package verdictd

import (
	"strings"
	"testing"
	"time"
)

// TestConfigConversations: conversation_ttl and max_conversations_per_principal have their
// defaults (the etcd store's ttl standing in for an unset conversation_ttl), and are refused
// out of bounds, each problem named.
func TestConfigConversations(t *testing.T) {
	tests := []struct {
		name, extra string
		want        string // the problems; "" = valid
		ttl         time.Duration
		max         int
	}{
		{"defaults", "", "", DefaultConversationTTL, DefaultMaxConversations},
		{"set", "conversation_ttl: 2h\nmax_conversations_per_principal: 50\n", "", 2 * time.Hour, 50},
		{"etcd ttl stands in", "state_store: {kind: etcd, endpoints: [http://127.0.0.1:1], ttl: 3h}\n", "", 3 * time.Hour, DefaultMaxConversations},
		{"own ttl over etcd's", "conversation_ttl: 1h\nstate_store: {kind: etcd, endpoints: [http://127.0.0.1:1], ttl: 3h}\n", "", time.Hour, DefaultMaxConversations},
		{"ttl too short", "conversation_ttl: 30s\n", "conversation_ttl 30s: want between 1m0s and 2160h0m0s", 0, 0},
		{"ttl too long", "conversation_ttl: 2161h\n", "conversation_ttl 2161h0m0s: want between 1m0s and 2160h0m0s", 0, 0},
		{"negative bound", "max_conversations_per_principal: -1\n",
			"max_conversations_per_principal -1: want between 1 and 1000000 (0 for the default 1000)", 0, 0},
		{"bound too large", "max_conversations_per_principal: 1000001\n",
			"max_conversations_per_principal 1000001: want between 1 and 1000000 (0 for the default 1000)", 0, 0},
		{"not a number", "max_conversations_per_principal: many\n", "max_conversations_per_principal", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := configWith(t, tt.extra)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v\nwant  %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.conversationTTL(); got != tt.ttl {
				t.Errorf("conversation ttl %s, want %s", got, tt.ttl)
			}
			if got := cfg.maxConversations(); got != tt.max {
				t.Errorf("max conversations %d, want %d", got, tt.max)
			}
		})
	}
}
