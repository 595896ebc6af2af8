package verdictd

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/testing/etcdtest"
	"github.com/verdictgate/verdict/store"
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
			"max_conversations_per_principal -1: want between 1 and 10000 (0 for the default 1000)", 0, 0},
		{"bound too large", "max_conversations_per_principal: 10001\n",
			"max_conversations_per_principal 10001: want between 1 and 10000 (0 for the default 1000)", 0, 0},
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

// TestConversationLimitService: on either state store (two replicas sharing etcd), a principal
// at max_conversations_per_principal is refused a new conversation with 429 conversation_limit
// on every replica, nothing of it recorded, while its live conversations and another
// principal's preflights are answered.
func TestConversationLimitService(t *testing.T) {
	bound := func(c *Config) { c.MaxConversationsPerPrincipal = 2 }
	for _, tc := range []struct {
		name string
		envs func(t *testing.T) []*env
	}{
		{"bbolt", func(t *testing.T) []*env { return []*env{newEnv(t, envOpts{mutate: bound})} }},
		{"etcd", func(t *testing.T) []*env { return newReplicas(t, etcdtest.Start(t), 2, envOpts{mutate: bound}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			envs := tc.envs(t)
			on := func(i int) *env { return envs[i%len(envs)] }
			req := func(principal, conv string) map[string]any {
				r := landlord() // to_account is asked: each counts an ask in its conversation
				r["principal"], r["conversation_id"] = principal, conv
				return r
			}
			for i, conv := range []string{"c1", "c2"} {
				if r := on(i).preflight(req("u_01", conv)); r.Outcome != "ask_user" {
					t.Fatalf("%s: %s", conv, r.Outcome)
				}
			}
			for i := range envs {
				body, _ := json.Marshal(req("u_01", "c3"))
				status, out := do(t, "POST", on(i).srv.URL+"/v1/preflight", callerToken, "application/json", body)
				var e struct{ Error struct{ Code string } }
				json.Unmarshal(out, &e)
				if status != http.StatusTooManyRequests || e.Error.Code != api.CodeConversationLimit {
					t.Fatalf("replica %d, a third conversation: %d %s", i, status, out)
				}
			}
			if r := on(1).preflight(req("u_01", "c1")); r.Outcome != "ask_user" {
				t.Fatalf("a live conversation: %s", r.Outcome)
			}
			if r := on(0).preflight(req("u_02", "c3")); r.Outcome != "ask_user" {
				t.Fatalf("another principal: %s", r.Outcome)
			}
			var stored int
			for _, e := range envs {
				err := e.svc.decisions.Since(context.Background(), time.Time{}, func(*store.Decision) error { stored++; return nil })
				if err != nil {
					t.Fatal(err)
				}
			}
			if stored != 4 {
				t.Errorf("%d records for 4 answered preflights", stored)
			}
		})
	}
}
