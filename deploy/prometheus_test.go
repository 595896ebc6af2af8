package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

func promtool(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "promtool", "Debian package prometheus; the alert rules are not checked")
}

// TestAlertRules checks the rules file with promtool and runs its unit tests.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesNameExportedSeries checks that every daemon series the rules read is one
// docs/operations.md lists as exported: a renamed metric must not leave an alert that can
// never fire.
func TestAlertRulesNameExportedSeries(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	series := regexp.MustCompile(`\b(?:verdictd|executor|mcpgate)_[a-z_]+\b`)
	seen := map[string]bool{}
	for _, m := range series.FindAllString(string(rules), -1) {
		if seen[m] {
			continue
		}
		seen[m] = true
		if !strings.Contains(string(ops), "`"+m+"{") && !strings.Contains(string(ops), "`"+m+"`") {
			t.Errorf("alerts.yaml reads %s, which docs/operations.md does not list", m)
		}
	}
	if len(seen) < 10 {
		t.Errorf("found only %d series in alerts.yaml: %v", len(seen), seen)
	}
}

// TestDashboardJobsAreTheChartsJobs checks that every job label the example Grafana dashboard
// and the alert rules match on is one the chart's ServiceMonitors give (rendered with the
// gateway on), and that the dashboard's process panels cover all three daemons.
func TestDashboardJobsAreTheChartsJobs(t *testing.T) {
	objs, err := render(t, "ci/gateway-values.yaml", "metrics.serviceMonitor.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for _, o := range objs {
		if o.kind() != "ServiceMonitor" {
			continue
		}
		for _, ep := range dig[[]any](o, "spec", "endpoints") {
			for _, rl := range dig[[]any](ep, "relabelings") {
				if dig[string](rl, "targetLabel") == "job" {
					jobs[dig[string](rl, "replacement")] = true
				}
			}
		}
	}
	if len(jobs) != 3 {
		t.Fatalf("the chart's ServiceMonitors give the jobs %v, want three", jobs)
	}
	// The blackbox exporter's probes of /readyz are a job of their own (see alerts.yaml).
	jobs["verdict-readyz"] = true
	matcher := regexp.MustCompile(`job=~?\\?"([^"\\]+)\\?"`)
	for _, file := range []string{filepath.Join("..", "examples", "grafana-dashboard.json"), filepath.Join("prometheus", "alerts.yaml")} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ms := matcher.FindAllStringSubmatch(string(b), -1)
		if len(ms) == 0 {
			t.Errorf("%s matches no job", file)
		}
		for _, m := range ms {
			named := strings.Split(m[1], "|")
			for _, j := range named {
				if !jobs[j] {
					t.Errorf("%s matches job %q, which no ServiceMonitor of the chart gives (%v)", file, j, jobs)
				}
			}
			if strings.HasPrefix(m[0], "job=~") && len(named) != 3 {
				t.Errorf("%s: %s does not name the three daemons' jobs", file, m[0])
			}
		}
	}
}
