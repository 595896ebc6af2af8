package policytest

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/verdictgate/verdict/policy"
)

// Formats a report is written in.
const (
	FormatText  = "text"
	FormatJSON  = "json"
	FormatJUnit = "junit"
)

// Formats lists the formats Write takes.
var Formats = []string{FormatText, FormatJSON, FormatJUnit}

// Report is the result of running test files against a policy.
type Report struct {
	Policy   string          `json:"policy"`
	Files    []*FileResult   `json:"files"`
	Passed   int             `json:"passed"`
	Failed   int             `json:"failed"`
	Coverage *CoverageReport `json:"coverage,omitempty"`
}

// CoverageReport is the coverage of a run: every item, and how many were covered.
type CoverageReport struct {
	Percent float64 `json:"percent"`
	Covered int     `json:"covered"`
	Total   int     `json:"total"`
	// Min is the percentage the run required (RequireCoverage), 0 for none; Short says the
	// run covered less, which fails it in every format.
	Min   float64 `json:"min,omitempty"`
	Short bool    `json:"short,omitempty"`
	Items []Item  `json:"items"`
}

// RequireCoverage makes min percent of the items the coverage a run must reach: a report
// that covers less says so in every format it is written in (a JUnit report with a failing
// case), not only in the exit status of the command that wrote it.
func (rep *Report) RequireCoverage(min float64) {
	if c := rep.Coverage; c != nil && min > 0 {
		c.Min, c.Short = min, !c.Complete(min)
	}
}

// shortText says that the coverage is under its minimum.
func (c *CoverageReport) shortText() string {
	return fmt.Sprintf("coverage %.1f%% is under the minimum %g%%", c.Percent, c.Min)
}

// Complete reports whether at least min percent of the items were covered, counted exactly.
func (c *CoverageReport) Complete(min float64) bool {
	return float64(c.Covered)*100 >= min*float64(c.Total)
}

// RunFiles loads the policy and the test files and runs every case. An error means nothing
// was run: the policy or a test file does not load (each problem with its file and line).
// withCoverage adds the coverage to the report.
func RunFiles(ctx context.Context, policyPath string, tests []string, withCoverage bool) (*Report, error) {
	pol, err := policy.Load(policyPath)
	if err != nil {
		return nil, err
	}
	files := make([]*File, len(tests))
	for i, t := range tests {
		if files[i], err = Load(t); err != nil {
			return nil, err
		}
	}
	r, err := NewRunner(pol)
	if err != nil {
		return nil, err
	}
	rep := &Report{Policy: policyPath}
	for _, f := range files {
		fr, err := r.Run(ctx, f)
		if err != nil {
			return nil, err
		}
		rep.Files = append(rep.Files, fr)
		n := fr.Failed()
		rep.Failed += n
		rep.Passed += len(fr.Cases) - n
	}
	if withCoverage {
		items := r.Coverage().Items()
		cr := &CoverageReport{Percent: r.Coverage().Percent(), Total: len(items), Items: items}
		for _, it := range items {
			if it.Covered {
				cr.Covered++
			}
		}
		rep.Coverage = cr
	}
	return rep, nil
}

// Write writes the report in format (text, json or junit).
func (rep *Report) Write(w io.Writer, format string) error {
	switch format {
	case FormatText:
		return rep.writeText(w)
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case FormatJUnit:
		return rep.writeJUnit(w)
	}
	return fmt.Errorf("policytest: unknown format %q (want text, json or junit)", format)
}

// writeText writes each failing case with a diff of what its step expected (-) and what it
// came to (+), then the counts and the coverage.
func (rep *Report) writeText(w io.Writer) error {
	var b strings.Builder
	for _, f := range rep.Files {
		for _, c := range f.Cases {
			if c.Passed() {
				continue
			}
			fmt.Fprintf(&b, "--- FAIL: %s (%s:%d)\n", c.Name, f.Path, c.Line)
			for _, fl := range c.Failures {
				b.WriteString(fl.text(f.Path))
			}
		}
	}
	if rep.Failed > 0 {
		fmt.Fprintf(&b, "FAIL: %d of %d cases failed\n", rep.Failed, rep.Failed+rep.Passed)
	} else {
		fmt.Fprintf(&b, "ok: %d cases passed\n", rep.Passed)
	}
	if c := rep.Coverage; c != nil {
		fmt.Fprintf(&b, "coverage: %.1f%% (%d of %d items)\n", c.Percent, c.Covered, c.Total)
		if c.Short {
			fmt.Fprintf(&b, "FAIL: %s\n", c.shortText())
		}
		for _, it := range c.Items {
			if !it.Covered {
				fmt.Fprintf(&b, "  not exercised: %-9s %s\n", it.Kind, it.Name)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// text is a failure as the text report writes it.
func (fl Failure) text(file string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    step %d (%s:%d):\n", fl.Step, file, fl.Line)
	if fl.Err != "" {
		fmt.Fprintf(&b, "        %s\n", fl.Err)
		return b.String()
	}
	b.WriteString("        (- expected, + actual)\n")
	for _, d := range fl.Diffs {
		fmt.Fprintf(&b, "        %s:\n          - %s\n          + %s\n", d.Path, d.Want, d.Got)
	}
	return b.String()
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
	SystemOut  string           `xml:"system-out,omitempty"`
}

type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Line      int           `xml:"line,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes one test suite per file and one test case per case, a failure holding the
// text report's diff; the coverage is a property of every suite, and what was not exercised
// its system-out.
func (rep *Report) writeJUnit(w io.Writer) error {
	out := junitSuites{Tests: rep.Passed + rep.Failed, Failures: rep.Failed}
	for _, f := range rep.Files {
		s := junitSuite{Name: f.Path, Tests: len(f.Cases), Failures: f.Failed()}
		if c := rep.Coverage; c != nil {
			s.Properties = &junitProperties{Property: []junitProperty{{Name: "coverage", Value: fmt.Sprintf("%.1f", c.Percent)}}}
			var missing strings.Builder
			for _, it := range c.Items {
				if !it.Covered {
					fmt.Fprintf(&missing, "not exercised: %s %s\n", it.Kind, it.Name)
				}
			}
			s.SystemOut = missing.String()
		}
		for _, c := range f.Cases {
			jc := junitCase{Name: c.Name, Classname: f.Path, File: f.Path, Line: c.Line}
			if !c.Passed() {
				var text strings.Builder
				for _, fl := range c.Failures {
					text.WriteString(fl.text(f.Path))
				}
				jc.Failure = &junitFailure{Message: fmt.Sprintf("step %d did not come to what it expected", c.Failures[0].Step), Text: text.String()}
			}
			s.Cases = append(s.Cases, jc)
		}
		out.Suites = append(out.Suites, s)
	}
	if c := rep.Coverage; c != nil && c.Short {
		// A CI that reads only the XML fails on it too.
		out.Tests++
		out.Failures++
		out.Suites = append(out.Suites, junitSuite{Name: "coverage", Tests: 1, Failures: 1, Cases: []junitCase{{
			Name: "coverage", Classname: rep.Policy, File: rep.Policy,
			Failure: &junitFailure{Message: c.shortText(), Text: fmt.Sprintf("%d of %d items exercised\n", c.Covered, c.Total)}}}})
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
