package verdictd

import (
	"strings"
	"testing"
	"time"
)

// goneServer is a policy server nothing answers for, its URL carrying a credential.
const goneServer = `  gone:
    audience: [executor-bank]
    tools_from: {url: "http://127.0.0.1:1/mcp?api_key=SECRET-123"}
`

// TestReadinessOverServersThatCannotBeListed: one policy server that cannot be listed leaves
// verdictd ready (its preflights end in definition_repair, on every replica alike) and is named
// in unlisted_servers; a policy whose servers all cannot be listed is not ready, unless it lists
// tools inline, which need no listing. The answers name servers, never their addresses.
func TestReadinessOverServersThatCannotBeListed(t *testing.T) {
	withGone := strings.Replace(bankPolicy, "tools:\n", goneServer+"tools:\n", 1)
	e := newEnv(t, envOpts{policy: withGone})
	status, body := do(t, "GET", e.srv.URL+"/readyz", "", "", nil)
	if status != 200 || !strings.Contains(string(body), `"unlisted_servers":["gone"]`) {
		t.Fatalf("/readyz with one of two servers listed: %d %s", status, body)
	}
	if e.metric("verdictd_ready") != 1 || e.metric(`verdictd_upstream_listed{server="bank"}`) != 1 || e.metric(`verdictd_upstream_listed{server="gone"}`) != 0 {
		t.Errorf("readiness series: ready %v, bank %v, gone %v", e.metric("verdictd_ready"),
			e.metric(`verdictd_upstream_listed{server="bank"}`), e.metric(`verdictd_upstream_listed{server="gone"}`))
	}

	for _, tc := range []struct {
		name, policy string
		status       int
	}{
		{"gone alone", "policy_version: \"2026-11-30.2\"\nservers:\n" + goneServer + "tools: {}\n", 503},
		{"gone and tools inline", "policy_version: \"2026-11-30.3\"\nservers:\n" + goneServer +
			"  inline:\n    audience: [executor-bank]\n    tools:\n      - {name: noschema, description: \"no schema\"}\n" +
			"tools:\n  inline/noschema: {actions: [\"send money\"]}\n", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.writePolicy(tc.policy, "")
			var body []byte
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var status int
				status, body = do(t, "GET", e.srv.URL+"/readyz", "", "", nil)
				if status == tc.status && strings.Contains(string(body), `"unlisted_servers":["gone"]`) && !strings.Contains(string(body), "has not been listed yet") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz: %d %s, want %d naming gone", status, body, tc.status)
				}
			}
			if tc.status == 503 && !strings.Contains(string(body), "server gone has never answered tools/list") {
				t.Errorf("/readyz says %s", body)
			}
			if strings.Contains(string(body), "SECRET") || strings.Contains(string(body), "127.0.0.1") {
				t.Errorf("/readyz quotes the server's address: %s", body)
			}
			if want := map[int]float64{200: 1, 503: 0}[tc.status]; e.metric("verdictd_ready") != want {
				t.Errorf("verdictd_ready = %v, want %v", e.metric("verdictd_ready"), want)
			}
		})
	}
}
