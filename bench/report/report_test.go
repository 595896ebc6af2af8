package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

func openTestdata(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// testdata/bench.txt is captured output of two of the report's go test invocations, with the
// report's own progress lines between them.
func TestParseBenchCaptured(t *testing.T) {
	out, err := ParseBench(openTestdata(t, "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if out.CPU != "AMD EPYC" {
		t.Errorf("CPU %q", out.CPU)
	}
	if len(out.Benches) != 15 {
		t.Errorf("%d benchmarks, want 15", len(out.Benches))
	}
	for _, tc := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkRawEd25519Verify", "ns/op", 61421},
		{"BenchmarkVerifyEdDSA", "allocs/op", 141},
		{"BenchmarkVerifyEdDSAOverRaw", "x-raw", 1.4},
		{"BenchmarkVerifyDigestScale/size=1MiB", "x-floor", 16.94},
		{"BenchmarkReferenceJCSDigest1KiB", "MB/s", 29.14},
		{"BenchmarkDigestScale/size=1KiB", "digest-ns", 5942},
		{"BenchmarkDigestScale/size=256KiB", "sha256-ns", 163958},
		{"BenchmarkDigestScale/size=1MiB", "B/op", 23042256},
	} {
		got, ok := out.Get(tc.name).Median(tc.unit)
		if !ok || got != tc.want {
			t.Errorf("%s %s = %v, %v; want %v", tc.name, tc.unit, got, ok, tc.want)
		}
	}
	if out.Get("BenchmarkVerifyDigestScale/size=1MiB-2") != nil {
		t.Error("name kept its GOMAXPROCS suffix")
	}
}

func TestParseBench(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		bench      string
		unit       string
		want       float64
		runs       int
		wantErrSub string
	}{
		{name: "median of three runs", bench: "BenchmarkX", unit: "ns/op", want: 20, runs: 3, in: `
BenchmarkX-2   	 100	 30 ns/op
BenchmarkX-2   	 100	 10 ns/op
BenchmarkX-2   	 100	 20 ns/op`},
		{name: "median of two runs", bench: "BenchmarkX", unit: "ns/op", want: 15, runs: 2, in: `
BenchmarkX-2   	 100	 10 ns/op
BenchmarkX-2   	 100	 20 ns/op`},
		{name: "custom units with non-ASCII", bench: "BenchmarkNonceConsumeParallel/consume+start", unit: "p50-µs", want: 1755, runs: 1, in: `
BenchmarkNonceConsumeParallel/consume+start-2         	     981	     58488 ns/op	     17097 ops/s	      1755 p50-µs	      2939 p99-µs	        15.57 updates/commit	   18154 B/op	      75 allocs/op`},
		{name: "single CPU: no suffix", bench: "BenchmarkPreflightSlots/slots=200", unit: "ns/slot", want: 7392, runs: 1, in: `
BenchmarkPreflightSlots/slots=200         	     200	   1478403 ns/op	      7392 ns/slot`},
		{name: "logs and summary lines skipped", bench: "BenchmarkY", unit: "ns/op", want: 5, runs: 1, in: `
goos: linux
BenchmarkY
    bench_test.go:12: a log line
BenchmarkY-2	some text a benchmark logged
BenchmarkY-2   	 1	 5 ns/op
--- FAIL: BenchmarkZ
PASS
ok  	github.com/verdictgate/verdict/x	0.1s`},
		{name: "odd value-unit pairs", wantErrSub: "malformed", in: "BenchmarkX-2 100 10 ns/op 7\n"},
		{name: "value not a number", wantErrSub: "value", in: "BenchmarkX-2 100 ten ns/op\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseBench(strings.NewReader(tc.in))
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := out.Get(tc.bench)
			if b == nil {
				t.Fatalf("%s not parsed; got %d benchmarks", tc.bench, len(out.Benches))
			}
			if len(b.Runs) != tc.runs {
				t.Errorf("%d runs, want %d", len(b.Runs), tc.runs)
			}
			if got, ok := b.Median(tc.unit); !ok || got != tc.want {
				t.Errorf("median %s = %v, %v; want %v", tc.unit, got, ok, tc.want)
			}
		})
	}
}

func TestParseLoad(t *testing.T) {
	l, err := ParseLoad(openTestdata(t, "load.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := Load{What: "executions of echo (nonces in bbolt)", N: 300, Bad: 0, Clients: 32, Throughput: 1518,
		Over: 198 * time.Millisecond, P50: 19218 * time.Microsecond, P90: 27839 * time.Microsecond,
		P99: 34152 * time.Microsecond, Max: 45179 * time.Microsecond}
	if *l != want {
		t.Errorf("got %+v\nwant %+v", *l, want)
	}

	l, err = ParseLoad(strings.NewReader(`dir: /tmp/preflightload-1
preflights ending verdict_issued: 20000 (non-200: 3) clients=32
throughput: 4212/s over 4.748s
latency: p50 850µs  p90 12.1ms  p99 1.5s  max 2m3s
`))
	if err != nil {
		t.Fatal(err)
	}
	if l.What != "preflights ending verdict_issued" || l.Bad != 3 || l.P50 != 850*time.Microsecond ||
		l.P99 != 1500*time.Millisecond || l.Max != 123*time.Second {
		t.Errorf("got %+v", *l)
	}

	if _, err := ParseLoad(strings.NewReader("execload: some requests failed\n")); err == nil {
		t.Error("output without a summary parsed")
	}
	if _, err := ParseLoad(strings.NewReader("x: 1 (non-200: 0) clients=1\nthroughput: 5/s over 1s\n")); err == nil {
		t.Error("summary without latency parsed")
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{formatNs(747.3), "747 ns"},
		{formatNs(5942), "5.94 µs"},
		{formatNs(83245), "83.2 µs"},
		{formatNs(1478403), "1.48 ms"},
		{formatNs(45496302), "45.5 ms"},
		{formatNs(2.5e9), "2.50 s"},
		{formatCount(17097.4), "17,097"},
		{formatCount(1234567), "1,234,567"},
		{formatCount(999), "999"},
		{formatRatio(1.3999), "1.40×"},
		{formatBytes(594048), "580 KiB"},
		{code("go test -bench 'a|b'"), "`go test -bench 'a\\|b'`"},
		{shellJoin([]string{"go", "test", "-run", "^$", "./x/"}), "go test -run '^$' ./x/"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestWriteReport renders the file from captured output: rows with data show it, rows without
// say they were not measured, and a verification ratio over the target is not reported as met.
func TestWriteReport(t *testing.T) {
	out, err := ParseBench(openTestdata(t, "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	load, err := ParseLoad(openTestdata(t, "load.txt"))
	if err != nil {
		t.Fatal(err)
	}
	res := &results{
		Cfg:     config{Count: 1, Bench: "50ms", N: 300, Clients: 32},
		Start:   time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Machine: machine{CPUs: 2, CPU: out.CPU, GoVersion: "go1.26.8", Kernel: "linux", Commit: "abc1234"},
		Benches: map[string]*BenchOutput{"verdict": out, "canonical": out},
		Loads:   map[string]*Load{"echo-bbolt": load},
		Sections: []*section{{Title: "load echo-bbolt", Command: "go run ./bench/execload -n 300 -c 32 -tool echo",
			Before: "1.00 2.00 3.00", After: "1.50 2.00 3.00", Others: 0.25, Took: time.Second}},
	}
	var doc bytes.Buffer
	writeReport(&doc, res)
	s := doc.String()
	for _, want := range []string{
		"| 83.2 µs, 141 allocs | raw `ed25519.Verify` of the same token: 61.4 µs | 1.40× (interleaved) | ≤ 1.3× raw verify | **no** |",
		"| 5.94 µs, 3 allocs |",
		"| 1 MiB | 12.6 ms | 743 µs | 16.9× |",
		"| 1,518/s (p50 19.2 ms, p99 34.2 ms) |",
		"| `go run ./bench/execload -n 300 -c 32 -tool echo` | 300 | 1,518/s |",
		"| 1.00 2.00 3.00 | 1.50 2.00 3.00 | 0.2 | 1s | ok |",
		"kept **0.2 of its 2 cores** busy",
		"one preflight, 6-field tool with one `oneOf`, ending `verdict_issued` (`gates.Engine.Run`, in-process, no I/O, no signing) | not measured |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Every table row of the main table has the same number of cells.
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "| verify") || strings.HasPrefix(line, "| one preflight") {
			if n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); n != 7 {
				t.Errorf("%d cell separators in %q", n, line)
			}
		}
	}
}

// TestQuickRun runs the whole report in its smoke mode: every benchmark and load tool once,
// briefly, against freshly built binaries, and requires every figure to be measured. It takes a
// minute or more, so -short skips it, as it does the other tests that build and run whole
// stacks.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs every benchmark and load tool")
	}
	// The executor's load on the etcd nonce store runs a private etcd.
	testtool.Path(t, "etcd", "Debian package etcd-server; the load on the etcd nonce store is not measured")
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	var log bytes.Buffer
	if err := run(context.Background(), config{Quick: true, Out: out, Count: 1, Bench: "50ms", N: 300, Clients: 32, Args: "-quick"}, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), notMeasured); n > 0 {
		t.Errorf("%d figures not measured:\n%s", n, b)
	}
}
