package mcpgate_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// readyz returns a daemon's /readyz status and body.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz polls base's /readyz until it answers status with a body holding want, and returns
// the body.
func waitReadyz(t *testing.T, base string, status int, want string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, body := readyz(t, base)
		if got == status && strings.Contains(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz still %d after 60s, want %d with %q: %s", base, got, status, want, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sample returns one series of base's /metrics, or fails.
func sample(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, val, ok := strings.Cut(sc.Text(), " "); ok && name == series {
			var v float64
			fmt.Sscan(val, &v)
			return v
		}
	}
	t.Fatalf("%s/metrics has no %s", base, series)
	return 0
}

// TestReadinessFollowsTheToolServer: verdictd, the executor and the gateway,
// each a process of its own listing one bank every 200ms, are ready; the
// bank is killed, and each turns not ready once its listing is past the
// grace (three refresh intervals), saying why on /readyz and in its
// <daemon>_ready and <daemon>_upstream_listed series; the bank is started
// again on its address, and each is ready again.
func TestReadinessFollowsTheToolServer(t *testing.T) {
	buildBins(t)
	bank := newOwnBank(t)
	s := &stack{dir: t.TempDir(),
		verdictdConfig: map[string]any{"catalog_refresh": "200ms"},
		executorConfig: map[string]any{"refresh_interval": "200ms"}}
	t.Cleanup(s.stop)
	policy, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy = bytes.ReplaceAll(policy, []byte("BANK_URL"), []byte(bank.url()))
	if err := s.startGate(policy, map[string]any{"bank": map[string]string{"url": bank.url()}}); err != nil {
		t.Fatal(err)
	}
	cfg := s.gatewayConfig(t.TempDir())
	cfg["refresh_interval"] = "200ms"
	g := startGateway(t, cfg)
	daemons := []struct{ name, base string }{{"verdictd", s.verdictd}, {"executor", s.executor}, {"mcpgate", g.url}}
	for _, d := range daemons {
		if got := sample(t, d.base, d.name+"_ready"); got != 1 {
			t.Errorf("%s_ready = %v while the bank is up", d.name, got)
		}
	}

	bank.kill()
	for _, d := range daemons {
		// The gateway's /readyz also asks verdictd and the executor, so it may answer 503 for
		// them before its own listing of the bank is past the grace: wait for its own reason.
		body := waitReadyz(t, d.base, http.StatusServiceUnavailable, "server bank has not answered tools/list for")
		if !strings.Contains(body, "server bank has not answered tools/list for") || !strings.Contains(body, `"unlisted_servers":["bank"]`) {
			t.Errorf("%s/readyz with the bank dead: %s", d.name, body)
		}
		if strings.Contains(body, bank.addr) {
			t.Errorf("%s/readyz quotes the bank's address: %s", d.name, body)
		}
		if got := sample(t, d.base, d.name+"_ready"); got != 0 {
			t.Errorf("%s_ready = %v with the bank dead", d.name, got)
		}
		if got := sample(t, d.base, d.name+`_upstream_listed{server="bank"}`); got != 0 {
			t.Errorf("%s_upstream_listed = %v with the bank dead", d.name, got)
		}
	}

	bank.start(t)
	for _, d := range daemons {
		body := waitReadyz(t, d.base, http.StatusOK, "")
		if strings.Contains(body, "unlisted_servers") {
			t.Errorf("%s/readyz with the bank back: %s", d.name, body)
		}
		if got := sample(t, d.base, d.name+`_upstream_listed{server="bank"}`); got != 1 {
			t.Errorf("%s_upstream_listed = %v with the bank back", d.name, got)
		}
	}
}
