package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyTest runs verdictd policy test as CI does: its exit status and what it prints.
func TestPolicyTest(t *testing.T) {
	pol := filepath.Join("..", "..", "examples", "policy.yaml")
	tests := filepath.Join("..", "..", "examples", "policy_test.yaml")
	original, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(broken, bytes.Replace(original, []byte("args.amount <= 5000000"), []byte("args.amount > 5000000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout
	}{
		{"passes with full coverage", []string{"test", "--coverage", "--min-coverage", "100", pol, tests}, 0, "coverage: 100.0%"},
		{"a broken policy fails", []string{"test", broken, tests}, 1, "--- FAIL: a transfer above 5,000,000 won is held"},
		{"no tests", []string{"test", pol}, 2, ""},
		{"unknown format", []string{"test", "--format", "xml", pol, tests}, 2, ""},
		{"min-coverage without coverage", []string{"test", "--min-coverage", "90", pol, tests}, 2, ""},
		{"a test file that does not load", []string{"test", pol, pol}, 1, ""},
		{"unknown command", []string{"lint"}, 2, ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"policy"}, tt.args...), &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, &stdout, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.out) {
				t.Errorf("stdout does not say %q:\n%s", tt.out, &stdout)
			}
		})
	}

	var out, stderr bytes.Buffer
	if code := run([]string{"policy", "test", "--coverage", "--format", "json", pol, tests}, &out, &stderr); code != 0 {
		t.Fatalf("json: exit %d: %s", code, &stderr)
	}
	var rep struct {
		Passed   int `json:"passed"`
		Coverage struct {
			Covered, Total int
		} `json:"coverage"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Passed == 0 || rep.Coverage.Covered != rep.Coverage.Total {
		t.Errorf("json report %+v (%v):\n%s", rep, err, &out)
	}
	out.Reset()
	if code := run([]string{"policy", "test", "--format", "junit", broken, tests}, &out, &stderr); code != 1 {
		t.Fatalf("junit: exit %d, want 1", code)
	}
	var suites struct {
		Failures int `xml:"failures,attr"`
		Suite    []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(out.Bytes(), &suites); err != nil || suites.Failures == 0 {
		t.Fatalf("junit report (%v):\n%s", err, &out)
	}
	for _, c := range suites.Suite[0].Cases {
		if c.Name == "a transfer above 5,000,000 won is held" && (c.Failure == nil || !strings.Contains(c.Failure.Text, "- hold")) {
			t.Errorf("junit: the held transfer's case carries no diff: %+v", c.Failure)
		}
	}
}
