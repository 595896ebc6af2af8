// Command testsummary reads the event stream of `go test -json` on its standard input and writes
// what `go test` writes without -v — the closing line of every package, and the whole output of
// what failed — followed by every skipped test with the reason it gave, so that a run says what
// it did not check. It exits 1 when a build, a package or a test failed, and 2 when the input is
// not an event stream.
//
// Usage:
//
//	go test -json ./... | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

func main() {
	failed, err := run(os.Stdin, os.Stdout)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	case failed:
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus the build events).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output and build-fail
	FailedBuild string
}

// chunk is a piece of a package's output and the test that wrote it ("" for the package).
type chunk struct {
	test, text string
}

// pkgRun is what one package's test binary has written so far.
type pkgRun struct {
	output []chunk
	failed map[string]bool  // tests that failed
	logs   map[string][]int // indexes into output, by test, for the skip reasons
}

// skip is a skipped test, the reason it logged last and where it logged it.
type skip struct {
	pkg, test, reason, where string
}

// summary turns the events into the report.
type summary struct {
	out     io.Writer
	pkgs    map[string]*pkgRun
	builds  map[string][]string // build output by import path
	skipped []skip
	failed  []string // failed tests and packages, in the order they ended
	passed  int      // tests
	nfailed int      // tests
}

// run reads the event stream from in and writes the report to out. It reports whether anything
// failed.
func run(in io.Reader, out io.Writer) (bool, error) {
	s := &summary{out: out, pkgs: map[string]*pkgRun{}, builds: map[string][]string{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20) // one event holds at most one output line, which a test controls
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event: the go command said something of its own. Pass it on.
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		s.event(e)
	}
	if err := sc.Err(); err != nil {
		return true, fmt.Errorf("reading the event stream after %d lines: %w", lines, err)
	}
	if lines == 0 {
		return true, errors.New("no events on standard input")
	}
	s.report()
	return len(s.failed) > 0, nil
}

func (s *summary) event(e event) {
	switch e.Action {
	case "build-output":
		s.builds[e.ImportPath] = append(s.builds[e.ImportPath], e.Output)
		return
	case "build-fail":
		for _, o := range s.builds[e.ImportPath] {
			io.WriteString(s.out, o)
		}
		delete(s.builds, e.ImportPath)
		return
	}
	if e.Package == "" {
		return
	}
	p := s.pkgs[e.Package]
	if p == nil {
		p = &pkgRun{failed: map[string]bool{}, logs: map[string][]int{}}
		s.pkgs[e.Package] = p
	}
	switch {
	case e.Action == "output":
		if e.Test != "" {
			p.logs[e.Test] = append(p.logs[e.Test], len(p.output))
		}
		p.output = append(p.output, chunk{e.Test, e.Output})
	case e.Test != "":
		s.testEnded(e, p)
	default:
		s.packageEnded(e, p)
	}
}

// testEnded counts a test's end and keeps what the report needs of it.
func (s *summary) testEnded(e event, p *pkgRun) {
	switch e.Action {
	case "pass":
		s.passed++
	case "fail":
		s.nfailed++
		p.failed[e.Test] = true
		s.failed = append(s.failed, e.Package+" "+e.Test)
	case "skip":
		var log []string
		for _, i := range p.logs[e.Test] {
			log = append(log, p.output[i].text)
		}
		reason, where := skipReason(strings.Join(log, ""))
		s.skipped = append(s.skipped, skip{e.Package, e.Test, reason, where})
	default: // run, pause, cont: nothing ended
		return
	}
	delete(p.logs, e.Test)
}

// packageEnded writes what `go test` writes for a package: its closing line when it passed, or
// the output of the package and of its failed tests when it failed.
func (s *summary) packageEnded(e event, p *pkgRun) {
	switch e.Action {
	case "pass", "skip":
		for _, c := range p.output {
			for l := range strings.Lines(c.text) {
				if c.test == "" && (strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?   ")) {
					io.WriteString(s.out, l)
				}
			}
		}
	case "fail":
		if len(p.failed) == 0 || e.FailedBuild != "" {
			s.failed = append(s.failed, e.Package)
		}
		for _, c := range p.output {
			if c.test != "" && !p.failed[c.test] {
				continue
			}
			for l := range strings.Lines(c.text) {
				if !strings.HasPrefix(l, "=== ") {
					io.WriteString(s.out, l)
				}
			}
		}
	default: // start
		return
	}
	delete(s.pkgs, e.Package)
}

// logStart matches the first line of a t.Log entry: the caller's file and line, indented once.
var logStart = regexp.MustCompile(`^    ([^ :]+\.go:\d+): `)

// skipReason returns the last entry a skipped test logged, which is its Skip message, and where
// it was logged.
func skipReason(log string) (reason, where string) {
	var entry []string
	for l := range strings.Lines(log) {
		l = strings.TrimRight(l, "\n")
		if m := logStart.FindStringSubmatch(l); m != nil {
			entry, where = []string{l[len(m[0]):]}, m[1]
			continue
		}
		if strings.HasPrefix(l, "        ") && entry != nil {
			entry = append(entry, strings.TrimSpace(l))
		}
	}
	if entry == nil {
		return "(no reason given)", ""
	}
	return strings.Join(entry, " "), where
}

// report writes the skipped tests grouped by package and reason (a helper that skips, such as
// one that needs etcd, gives one reason from many places), the count of tests, and the
// failures again, so that they are the last thing on the screen.
func (s *summary) report() {
	// A package that never ended (the go command was interrupted) failed.
	var unended []string
	for name := range s.pkgs {
		unended = append(unended, name)
	}
	sort.Strings(unended)
	for _, name := range unended {
		s.packageEnded(event{Action: "fail", Package: name}, s.pkgs[name])
	}
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.out, "\n== skipped: %d\n", len(s.skipped))
		sort.SliceStable(s.skipped, func(i, j int) bool {
			a, b := s.skipped[i], s.skipped[j]
			if a.pkg != b.pkg {
				return a.pkg < b.pkg
			}
			return a.reason < b.reason
		})
		for i, k := range s.skipped {
			if i == 0 || k.pkg != s.skipped[i-1].pkg {
				fmt.Fprintf(s.out, "%s\n", k.pkg)
			}
			if i == 0 || k.pkg != s.skipped[i-1].pkg || k.reason != s.skipped[i-1].reason {
				fmt.Fprintf(s.out, "  %s\n", k.reason)
			}
			if k.where != "" {
				fmt.Fprintf(s.out, "    %s (%s)\n", k.test, k.where)
			} else {
				fmt.Fprintf(s.out, "    %s\n", k.test)
			}
		}
	}
	fmt.Fprintf(s.out, "\n== tests: %d passed, %d failed, %d skipped\n", s.passed, s.nfailed, len(s.skipped))
	if len(s.failed) > 0 {
		fmt.Fprintf(s.out, "== failed: %d\n", len(s.failed))
		for _, f := range s.failed {
			fmt.Fprintf(s.out, "  %s\n", f)
		}
		fmt.Fprintln(s.out, "FAIL")
	}
}
