package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/verdictgate/verdict/internal/testing/nodetest"
	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// redocly is Redocly CLI as api/lint pins it with its lock file.
var redocly = nodetest.Program{
	Dir:    "lint",
	Name:   "redocly",
	Pinned: map[string]string{"@redocly/cli": "2.77.0"},
	// Redocly CLI 2 runs on Node.js 20.19 or newer.
	MinNode: 20,
}

// TestOpenAPILint lints openapi.yaml with Redocly CLI's recommended rules (lint/redocly.yaml):
// no error, and no warning but those lint/.redocly.lint-ignore.yaml keeps, each with its
// reason. A YAML slip that still parses, such as an unquoted comma in a flow mapping cutting a
// description short, is an error here. It needs node and npm (skipped without, failed under
// VERDICT_CI=1).
func TestOpenAPILint(t *testing.T) {
	_, dir := nodetest.Install(t, redocly)
	npx, err := exec.LookPath("npx")
	if err != nil {
		testtool.Missing(t, "npx not found: "+err.Error())
	}
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config, err := filepath.Abs(filepath.Join("lint", "redocly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// --no: the pinned install only, never a download of whatever version is current.
	cmd := exec.Command(npx, "--no", "redocly", "lint", spec, "--config", config, "--format=json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var report struct {
		Totals struct {
			Errors, Warnings, Ignored int
		}
		Version  string
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string
			Message  string
			Location []struct {
				Source  struct{ Ref string }
				Pointer string
				Start   struct{ Line, Col int }
			}
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("redocly lint: %v, and its output is not its JSON report (%v)\n%s\n%s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	if report.Version != redocly.Pinned["@redocly/cli"] {
		t.Errorf("redocly %s ran, want the pinned %s", report.Version, redocly.Pinned["@redocly/cli"])
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			l := p.Location[0]
			where = fmt.Sprintf("%s:%d:%d %s", filepath.Base(l.Source.Ref), l.Start.Line, l.Start.Col, l.Pointer)
		}
		t.Errorf("%s %s: %s (%s)", p.Severity, where, p.Message, p.RuleID)
	}
	if report.Totals.Errors+report.Totals.Warnings > 0 || runErr != nil {
		t.Errorf("redocly lint: %d errors, %d warnings (%v)", report.Totals.Errors, report.Totals.Warnings, runErr)
	}
}
