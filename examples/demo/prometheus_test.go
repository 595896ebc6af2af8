package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// TestPrometheusScrapesBothDaemons starts Debian's prometheus against a running stack and asks
// it for the daemons' series: the names on the dashboards are what a real scrape returns.
func TestPrometheusScrapesBothDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the whole stack")
	}
	prom := testtool.Path(t, "prometheus", "Debian package prometheus; no real scrape of the daemons")
	d, err := newDemo(false)
	if err != nil {
		t.Fatal(err)
	}
	d.stdio = true
	startTestStack(t, d)
	rec := verdictFor(t, d, "c_prom")
	if status, code := d.execute(t, rec["verdict"].(string), rec["call_arguments"]); status != 200 {
		t.Fatalf("execute: %d %s", status, code)
	}

	checkDashboardNames(t, d)

	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: verdictd
    static_configs: [{targets: [%q]}]
  - job_name: executor
    static_configs: [{targets: [%q]}]
`, strings.TrimPrefix(d.verdictd, "http://"), strings.TrimPrefix(d.executor, "http://"))
	if err := os.WriteFile(d.path("prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, _ := os.Create(d.path("prometheus.log"))
	defer logf.Close()
	cmd := exec.Command(prom, "--config.file="+d.path("prometheus.yml"), "--storage.tsdb.path="+d.path("prom-data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	for _, q := range []string{
		`executor_executions_total{decision="executed"}`,
		`verdictd_preflight_total{outcome="verdict_issued"}`,
		`verdictd_verdicts_issued_total`,
		`executor_verdicts_total{result="accepted"}`,
	} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, err := query(addr, q)
			if err == nil && v != "" && v != "0" {
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(d.path("prometheus.log"))
				t.Fatalf("prometheus has no %s (last: %q, %v)\n%s", q, v, err, b)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// query returns the first sample value of an instant query, or "" when there is none.
func query(addr, q string) (string, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Status string
		Data   struct {
			Result []struct {
				Value []any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	if len(out.Data.Result) == 0 || len(out.Data.Result[0].Value) < 2 {
		return "", nil
	}
	return fmt.Sprint(out.Data.Result[0].Value[1]), nil
}

// checkDashboardNames fails if the example Grafana dashboard queries a series neither daemon
// exports.
func checkDashboardNames(t *testing.T, d *demo) {
	t.Helper()
	dash, err := os.ReadFile("../grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var exported strings.Builder
	for _, base := range []string{d.verdictd, d.executor} {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		exported.Write(b)
	}
	for _, name := range regexp.MustCompile(`\b(?:verdictd|executor)_[a-z_]+`).FindAllString(string(dash), -1) {
		if !strings.Contains(exported.String(), "\n"+name) {
			t.Errorf("the dashboard queries %s, which neither daemon exports", name)
		}
	}
}
