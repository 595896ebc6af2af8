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

// TestPolicyTestCoverageShort: a run that covers less than --min-coverage fails in every form
// CI may read: the exit status, the text report and a failing case of the JUnit report.
func TestPolicyTestCoverageShort(t *testing.T) {
	pol := filepath.Join("..", "..", "examples", "policy.yaml")
	all, err := os.ReadFile(filepath.Join("..", "..", "examples", "policy_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The first case alone, its tools read from the example's listing.
	first, rest, ok := bytes.Cut(all, []byte("\n  - name:"))
	second := bytes.Index(rest, []byte("\n  - name:"))
	if !ok || second < 0 {
		t.Fatal("the example tests changed shape")
	}
	tools, err := filepath.Abs(filepath.Join("..", "..", "examples", "bank", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	one := bytes.Replace(append(append(first, "\n  - name:"...), rest[:second]...), []byte("tools_file: bank/tools.json"), []byte("tools_file: "+tools), 1)
	partial := filepath.Join(t.TempDir(), "partial_test.yaml")
	if err := os.WriteFile(partial, append(one, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "junit"} {
		var out, stderr bytes.Buffer
		if code := run([]string{"policy", "test", "--coverage", "--min-coverage", "100", "--format", format, pol, partial}, &out, &stderr); code != 1 {
			t.Fatalf("%s: exit %d, want 1\n%s%s", format, code, &out, &stderr)
		}
		switch format {
		case "text":
			if !strings.Contains(out.String(), "FAIL: coverage") {
				t.Errorf("the text report does not say the coverage fails:\n%s", &out)
			}
		case "junit":
			var suites struct {
				Failures int `xml:"failures,attr"`
				Suite    []struct {
					Name  string `xml:"name,attr"`
					Cases []struct {
						Failure *struct {
							Message string `xml:"message,attr"`
						} `xml:"failure"`
					} `xml:"testcase"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(out.Bytes(), &suites); err != nil || suites.Failures != 1 {
				t.Fatalf("junit report (%v), want one failure, the coverage's:\n%s", err, &out)
			}
			last := suites.Suite[len(suites.Suite)-1]
			if last.Name != "coverage" || len(last.Cases) != 1 || last.Cases[0].Failure == nil ||
				!strings.Contains(last.Cases[0].Failure.Message, "under the minimum 100%") {
				t.Errorf("junit: no failing coverage case:\n%s", &out)
			}
		}
	}
}
