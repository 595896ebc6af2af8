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
			in:   "go: downloading example.com/m v1.0.0\n" + ev("output", "p", "", "ok  \tp\t0.1s\n") + ev("pass", "p", "", ""),
			want: "go: downloading example.com/m v1.0.0\nok  \tp\t0.1s\n\n== tests: 0 passed, 0 failed, 0 skipped\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			failed, err := run(strings.NewReader(tt.in), &out)
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
	if failed, err := run(strings.NewReader(""), &out); err == nil || !failed {
		t.Fatalf("an empty stream: failed %v, error %v", failed, err)
	}
}
