// Command testsummary reads the event stream of `go test -json` on its standard input and writes
// what `go test` writes without -v — the closing line of every package, and the whole output of
// what failed — followed by every skipped test with the reason it gave, so that a run says what
// it did not check. It exits 1 when a build, a package or a test failed, and 2 when the input is
// not an event stream or the allow-list cannot be read.
//
// With -allow-skips FILE a skip is a failure too, unless an entry of FILE allows it: a test
// cannot pass CI by not running. FILE holds one entry a line: the package's import path, a
// regular expression the whole test name must match, and the reason the test cannot run there,
// separated by white space; blank lines and lines starting with # are comments. The entries are
// printed with how many skips each allowed, and an entry that allowed none is a failure too (it
// is stale: the test runs now, or has another name), so that the list stays short.
//
// Usage:
//
//	go test -json ./... | go run ./scripts/testsummary [-allow-skips FILE]
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

func main() {
	allowFile := flag.String("allow-skips", "", "fail on every skipped test that no entry of `file` allows")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "testsummary: reads go test -json on standard input; no arguments")
		os.Exit(2)
	}
	var allow *allowList
	if *allowFile != "" {
		f, err := os.Open(*allowFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		allow, err = parseAllowList(*allowFile, f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	failed, err := run(os.Stdin, os.Stdout, allow)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	case failed:
		os.Exit(1)
	}
}

// allowList is the skips a run may have: nil allows every skip.
type allowList struct {
	file    string
	entries []*allowed
}

// allowed is one entry of the allow-list.
type allowed struct {
	line    int
	pkg     string
	pattern string         // as written
	test    *regexp.Regexp // pattern, matching the whole test name
	why     string
	matched int // skips it allowed
}

// parseAllowList reads an allow-list; an entry it cannot use is an error naming its line.
func parseAllowList(file string, r io.Reader) (*allowList, error) {
	l := &allowList{file: file}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pkg, rest := field(line)
		pattern, why := field(rest)
		if why == "" {
			return nil, fmt.Errorf("%s:%d: want a package, a test name pattern and why the test cannot run", file, n)
		}
		re, err := regexp.Compile("^(?:" + pattern + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s:%d: test name pattern: %w", file, n, err)
		}
		key := pkg + " " + pattern
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s:%d: %s %s is allowed on line %d already", file, n, pkg, pattern, first)
		}
		seen[key] = n
		l.entries = append(l.entries, &allowed{line: n, pkg: pkg, pattern: pattern, test: re, why: why})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return l, nil
}

// field splits s at its first run of white space.
func field(s string) (first, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
}

// allows returns the first entry that allows the skip of pkg's test, or nil.
func (l *allowList) allows(pkg, test string) *allowed {
	for _, e := range l.entries {
		if e.pkg == pkg && e.test.MatchString(test) {
			return e
		}
	}
	return nil
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
	ended  int              // tests (and subtests) that passed, failed or skipped
}

// skip is a skipped test, the reason it logged last and where it logged it.
type skip struct {
	pkg, test, reason, where string
	denied                   bool // the allow-list does not allow it
}

// summary turns the events into the report.
type summary struct {
	out     io.Writer
	allow   *allowList // nil: every skip is allowed
	pkgs    map[string]*pkgRun
	builds  map[string][]string // build output by import path
	skipped []skip
	failed  []string // failed tests and packages, in the order they ended
	passed  int      // tests
	nfailed int      // tests
}

// run reads the event stream from in and writes the report to out. It reports whether anything
// failed: a build, a package or a test, and with an allow-list, a skip it does not allow or an
// entry that allowed none.
func run(in io.Reader, out io.Writer, allow *allowList) (bool, error) {
	s := &summary{out: out, allow: allow, pkgs: map[string]*pkgRun{}, builds: map[string][]string{}}
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
		k := skip{pkg: e.Package, test: e.Test, reason: reason, where: where}
		if s.allow != nil {
			if a := s.allow.allows(e.Package, e.Test); a != nil {
				a.matched++
			} else {
				k.denied = true
			}
		}
		s.skipped = append(s.skipped, k)
	default: // run, pause, cont: nothing ended
		return
	}
	p.ended++
	delete(p.logs, e.Test)
}

// packageEnded writes what `go test` writes for a package: its closing line when it passed, or
// the output of the package and of its failed tests when it failed.
func (s *summary) packageEnded(e event, p *pkgRun) {
	switch e.Action {
	case "pass", "skip":
		// A package with tests that passes without running one (a TestMain that returns
		// before m.Run, a -run that matches nothing) checked nothing: it fails. A package
		// without test files ends in "skip", and has nothing to run.
		if e.Action == "pass" && p.ended == 0 {
			s.failed = append(s.failed, e.Package+": ran no test")
		}
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

// reportAllowList writes every entry of the allow-list with the number of skips it allowed. An
// entry that allowed none is stale and fails the run.
func (s *summary) reportAllowList() {
	if len(s.allow.entries) == 0 {
		fmt.Fprintf(s.out, "\n== allowed skips (%s): none\n", s.allow.file)
		return
	}
	fmt.Fprintf(s.out, "\n== allowed skips (%s): %d\n", s.allow.file, len(s.allow.entries))
	for _, a := range s.allow.entries {
		fmt.Fprintf(s.out, "  %s:%d: %s %s: %s\n", s.allow.file, a.line, a.pkg, a.pattern, a.why)
		if a.matched == 0 {
			fmt.Fprintf(s.out, "    stale: allowed no skip\n")
			s.failed = append(s.failed, fmt.Sprintf("stale allow-list entry: %s:%d", s.allow.file, a.line))
		} else {
			fmt.Fprintf(s.out, "    allowed %d\n", a.matched)
		}
	}
}

// report writes the skipped tests grouped by package and reason (a helper that skips, such as
// one that needs etcd, gives one reason from many places), the count of tests, and the
// failures again, so that they are the last thing on the screen.
func (s *summary) report() {
	// A package that never ended (the go command was interrupted) failed.
	for _, name := range slices.Sorted(maps.Keys(s.pkgs)) {
		s.packageEnded(event{Action: "fail", Package: name}, s.pkgs[name])
	}
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.out, "\n== skipped: %d\n", len(s.skipped))
		slices.SortStableFunc(s.skipped, func(a, b skip) int {
			return cmp.Or(strings.Compare(a.pkg, b.pkg), strings.Compare(a.reason, b.reason))
		})
		for i, k := range s.skipped {
			if i == 0 || k.pkg != s.skipped[i-1].pkg {
				fmt.Fprintf(s.out, "%s\n", k.pkg)
			}
			if i == 0 || k.pkg != s.skipped[i-1].pkg || k.reason != s.skipped[i-1].reason {
				fmt.Fprintf(s.out, "  %s\n", k.reason)
			}
			line := "    " + k.test
			if k.where != "" {
				line += " (" + k.where + ")"
			}
			if k.denied {
				line += ": not on the allow-list"
				s.failed = append(s.failed, "skip not allowed: "+k.pkg+" "+k.test)
			}
			fmt.Fprintln(s.out, line)
		}
	}
	if s.allow != nil {
		s.reportAllowList()
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
