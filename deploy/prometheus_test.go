package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus): the alert rules are not checked")
	}
	return bin
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
