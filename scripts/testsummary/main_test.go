package main

import (
	"strings"
	"testing"
)

// ev writes one event line as `go test -json` does.
func ev(action, pkg, test, output string) string {
	line := `{"Action":"` + action + `","Package":"` + pkg + `"`
	if test != "" {
		line += `,"Test":"` + test + `"`
	}
	if output != "" {
		line += `,"Output":` + quote(output)
	}
	return line + "}\n"
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantFailed bool
		want       string
	}{
		{
			name: "a passing package shows its closing line only",
			in: ev("start", "p", "", "") +
				ev("run", "p", "TestA", "") +
				ev("output", "p", "TestA", "=== RUN   TestA\n") +
				ev("output", "p", "TestA", "    a_test.go:3: noise\n") +
				ev("output", "p", "TestA", "--- PASS: TestA (0.00s)\n") +
				ev("pass", "p", "TestA", "") +
				ev("output", "p", "", "PASS\n") +
				ev("output", "p", "", "ok  \tp\t0.1s\n") +
				ev("pass", "p", "", ""),
			want: "ok  \tp\t0.1s\n\n== tests: 1 passed, 0 failed, 0 skipped\n",
		},
		{
			name: "a skip is listed with its last log entry and where it was logged",
			in: ev("output", "p", "TestS", "=== RUN   TestS\n") +
				ev("output", "p", "TestS", "    s_test.go:5: hello\n") +
				ev("output", "p", "TestS", "    s_test.go:6: etcd is not installed;\n") +
				ev("output", "p", "TestS", "        .ci/run installs it\n") +
				ev("output", "p", "TestS", "--- SKIP: TestS (0.00s)\n") +
				ev("skip", "p", "TestS", "") +
				ev("output", "p", "TestT", "--- SKIP: TestT (0.00s)\n") +
				ev("skip", "p", "TestT", "") +
				ev("output", "p", "", "ok  \tp\t0.1s\n") +
				ev("pass", "p", "", "") +
				ev("output", "q", "", "?   \tq\t[no test files]\n") +
				ev("skip", "q", "", ""),
			want: "ok  \tp\t0.1s\n?   \tq\t[no test files]\n" +
				"\n== skipped: 2\np\n" +
				"  (no reason given)\n    TestT\n" +
				"  etcd is not installed; .ci/run installs it\n    TestS (s_test.go:6)\n" +
				"\n== tests: 0 passed, 0 failed, 2 skipped\n",
		},
		{
			name: "one reason, several tests",
			in: ev("output", "p", "TestA", "    e_test.go:9: no etcd\n") +
				ev("skip", "p", "TestA", "") +
				ev("output", "p", "TestB", "    e_test.go:40: no etcd\n") +
				ev("skip", "p", "TestB", "") +
				ev("pass", "p", "", ""),
			want: "\n== skipped: 2\np\n  no etcd\n    TestA (e_test.go:9)\n    TestB (e_test.go:40)\n" +
				"\n== tests: 0 passed, 0 failed, 2 skipped\n",
		},
		{
			name: "a failing test shows its output, not that of the tests that passed",
			in: ev("output", "p", "TestA", "=== RUN   TestA\n") +
				ev("output", "p", "TestA", "    a_test.go:3: noise\n") +
				ev("output", "p", "TestA", "--- PASS: TestA (0.00s)\n") +
				ev("pass", "p", "TestA", "") +
				ev("output", "p", "TestF", "=== RUN   TestF\n") +
				ev("output", "p", "TestF", "    f_test.go:4: bad thing\n") +
				ev("output", "p", "TestF", "--- FAIL: TestF (0.00s)\n") +
				ev("fail", "p", "TestF", "") +
				ev("output", "p", "", "FAIL\n") +
				ev("output", "p", "", "FAIL\tp\t0.1s\n") +
				ev("fail", "p", "", ""),
			wantFailed: true,
			want: "    f_test.go:4: bad thing\n--- FAIL: TestF (0.00s)\nFAIL\nFAIL\tp\t0.1s\n" +
				"\n== tests: 1 passed, 1 failed, 0 skipped\n== failed: 1\n  p TestF\nFAIL\n",
		},
		{
			name: "a build failure shows the compiler's output",
			in: `{"ImportPath":"b [b.test]","Action":"build-output","Output":"b_test.go:3:28: undefined: x\n"}` + "\n" +
				`{"ImportPath":"b [b.test]","Action":"build-fail"}` + "\n" +
				ev("output", "b", "", "FAIL\tb [build failed]\n") +
				`{"Action":"fail","Package":"b","FailedBuild":"b [b.test]"}` + "\n",
			wantFailed: true,
			want: "b_test.go:3:28: undefined: x\nFAIL\tb [build failed]\n" +
				"\n== tests: 0 passed, 0 failed, 0 skipped\n== failed: 1\n  b\nFAIL\n",
		},
		{
			name: "a package that never ended failed",
			in: ev("start", "p", "", "") +
				ev("output", "p", "TestH", "=== RUN   TestH\n") +
				ev("output", "p", "", "panic: test timed out after 10m0s\n"),
			wantFailed: true,
			want:       "panic: test timed out after 10m0s\n\n== tests: 0 passed, 0 failed, 0 skipped\n== failed: 1\n  p\nFAIL\n",
		},
		{
			name: "what is not an event passes through",
			in: "go: downloading example.com/m v1.0.0\n" + ev("pass", "p", "TestA", "") +
				ev("output", "p", "", "ok  \tp\t0.1s\n") + ev("pass", "p", "", ""),
			want: "go: downloading example.com/m v1.0.0\nok  \tp\t0.1s\n\n== tests: 1 passed, 0 failed, 0 skipped\n",
		},
		{
			name: "a package that passes without running a test failed",
			in: ev("start", "p", "", "") +
				ev("output", "p", "", "ok  \tp\t0.1s [no tests to run]\n") +
				ev("pass", "p", "", ""),
			wantFailed: true,
			want: "ok  \tp\t0.1s [no tests to run]\n\n== tests: 0 passed, 0 failed, 0 skipped\n" +
				"== failed: 1\n  p: ran no test\nFAIL\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			failed, err := run(strings.NewReader(tt.in), &out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tt.wantFailed {
				t.Errorf("failed = %v, want %v", failed, tt.wantFailed)
			}
			if out.String() != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
}

func TestRunWithoutEvents(t *testing.T) {
	var out strings.Builder
	if failed, err := run(strings.NewReader(""), &out, nil); err == nil || !failed {
		t.Fatalf("an empty stream: failed %v, error %v", failed, err)
	}
}

// skipped writes the events of pkg's test that skipped with why, logged at s_test.go:7.
func skipped(pkg, test, why string) string {
	return ev("output", pkg, test, "    s_test.go:7: "+why+"\n") + ev("skip", pkg, test, "")
}

func passed(pkg, test string) string { return ev("pass", pkg, test, "") }

func TestRunWithAllowList(t *testing.T) {
	const list = "# why each may skip\n" +
		"\n" +
		"p TestImagesRun   no container runtime here\n" +
		"p TestSub/.*      the subtests need a GPU\n"
	tests := []struct {
		name       string
		list       string
		in         string
		wantFailed bool
		want       string
	}{
		{
			name: "allowed skips pass, and the list is printed with what each entry allowed",
			list: list,
			in: skipped("p", "TestImagesRun", "no podman") +
				skipped("p", "TestSub/a", "no GPU") + skipped("p", "TestSub/b", "no GPU") + passed("p", "TestSub") +
				ev("pass", "p", "", ""),
			want: "\n== skipped: 3\np\n" +
				"  no GPU\n    TestSub/a (s_test.go:7)\n    TestSub/b (s_test.go:7)\n" +
				"  no podman\n    TestImagesRun (s_test.go:7)\n" +
				"\n== allowed skips (allow): 2\n" +
				"  allow:3: p TestImagesRun: no container runtime here\n    allowed 1\n" +
				"  allow:4: p TestSub/.*: the subtests need a GPU\n    allowed 2\n" +
				"\n== tests: 1 passed, 0 failed, 3 skipped\n",
		},
		{
			name: "a skip no entry allows fails the run, and so does the entry it leaves stale",
			list: list,
			in: skipped("p", "TestImagesRun", "no podman") +
				skipped("p", "TestQuickRun", "set BENCH_REPORT_SMOKE=1") +
				ev("pass", "p", "", ""),
			wantFailed: true,
			want: "\n== skipped: 2\np\n" +
				"  no podman\n    TestImagesRun (s_test.go:7)\n" +
				"  set BENCH_REPORT_SMOKE=1\n    TestQuickRun (s_test.go:7): not on the allow-list\n" +
				"\n== allowed skips (allow): 2\n" +
				"  allow:3: p TestImagesRun: no container runtime here\n    allowed 1\n" +
				"  allow:4: p TestSub/.*: the subtests need a GPU\n    stale: allowed no skip\n" +
				"\n== tests: 0 passed, 0 failed, 2 skipped\n" +
				"== failed: 2\n  skip not allowed: p TestQuickRun\n  stale allow-list entry: allow:4\nFAIL\n",
		},
		{
			name: "the pattern matches the whole test name, in the named package only",
			list: "p TestA x\n",
			in: skipped("p", "TestAB", "r") + skipped("p", "TestA/sub", "r") + skipped("q", "TestA", "r") +
				ev("pass", "p", "", "") + ev("pass", "q", "", ""),
			wantFailed: true,
			want: "\n== skipped: 3\np\n" +
				"  r\n    TestAB (s_test.go:7): not on the allow-list\n    TestA/sub (s_test.go:7): not on the allow-list\n" +
				"q\n  r\n    TestA (s_test.go:7): not on the allow-list\n" +
				"\n== allowed skips (allow): 1\n  allow:1: p TestA: x\n    stale: allowed no skip\n" +
				"\n== tests: 0 passed, 0 failed, 3 skipped\n" +
				"== failed: 4\n  skip not allowed: p TestAB\n  skip not allowed: p TestA/sub\n" +
				"  skip not allowed: q TestA\n  stale allow-list entry: allow:1\nFAIL\n",
		},
		{
			name: "an empty list allows no skip",
			list: "# nothing may skip\n",
			in:   passed("p", "TestA") + ev("pass", "p", "", ""),
			want: "\n== allowed skips (allow): none\n\n== tests: 1 passed, 0 failed, 0 skipped\n",
		},
		{
			name:       "an empty list and a skip",
			list:       "",
			in:         skipped("p", "TestA", "no etcd") + ev("pass", "p", "", ""),
			wantFailed: true,
			want: "\n== skipped: 1\np\n  no etcd\n    TestA (s_test.go:7): not on the allow-list\n" +
				"\n== allowed skips (allow): none\n\n== tests: 0 passed, 0 failed, 1 skipped\n" +
				"== failed: 1\n  skip not allowed: p TestA\nFAIL\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allow, err := parseAllowList("allow", strings.NewReader(tt.list))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			failed, err := run(strings.NewReader(tt.in), &out, allow)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tt.wantFailed {
				t.Errorf("failed = %v, want %v", failed, tt.wantFailed)
			}
			if out.String() != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
}

func TestParseAllowList(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		want    []allowed // line, pkg, pattern, why
		wantErr string
	}{
		{
			name: "comments, blank lines, and a reason of several words",
			list: "# a comment\n\n  p/q   TestA|TestB\t needs  a  thing \n",
			want: []allowed{{line: 3, pkg: "p/q", pattern: "TestA|TestB", why: "needs  a  thing"}},
		},
		{name: "no reason", list: "p TestA\n", wantErr: "allow:1: want a package, a test name pattern and why the test cannot run"},
		{name: "no pattern", list: "# c\np\n", wantErr: "allow:2: want a package, a test name pattern and why the test cannot run"},
		{name: "a pattern that is no regular expression", list: "p Test( x\n", wantErr: "allow:1: test name pattern: error parsing regexp"},
		{name: "an entry twice", list: "p TestA x\np TestA y\n", wantErr: "allow:2: p TestA is allowed on line 1 already"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := parseAllowList("allow", strings.NewReader(tt.list))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(l.entries) != len(tt.want) {
				t.Fatalf("%d entries, want %d", len(l.entries), len(tt.want))
			}
			for i, e := range l.entries {
				w := tt.want[i]
				if e.line != w.line || e.pkg != w.pkg || e.pattern != w.pattern || e.why != w.why {
					t.Errorf("entry %d = %d %q %q %q, want %d %q %q %q", i, e.line, e.pkg, e.pattern, e.why, w.line, w.pkg, w.pattern, w.why)
				}
			}
		})
	}
}
