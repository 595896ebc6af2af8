// Command report measures the project against the floors it sits on and writes BENCHMARKS.md:
// the Go benchmarks of the verdict core, the canonical digest, the preflight engine and the
// durable stores (each interleaved with or beside its floor: raw ed25519, SHA-256,
// encoding/json, JSON Schema validation, one bbolt commit with fsync), how their cost grows
// with argument size and slot count, and the closed-loop load tools against real executor and
// verdictd processes, and what mcpgate adds to a tool call (bench/gateload).
//
// Run it from anywhere in the module:
//
//	go run ./bench/report            # full run, a few minutes; writes BENCHMARKS.md at the module root
//	go run ./bench/report -quick     # smoke run: one short pass of everything
//	go run ./bench/report -o FILE    # write FILE instead
//
// It builds what it needs (go test compiles the benchmarks; the load tools build the daemons).
// The etcd load run needs an etcd binary in PATH and is skipped without one. A section that
// fails is reported as not measured in the file, and the command exits with status 1.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// config is what the flags chose.
type config struct {
	Quick   bool
	Out     string // file to write
	Count   int    // go test -count
	Bench   string // go test -benchtime
	N       int    // requests per load run
	Clients int    // load tool concurrency
	Args    string // the flags as given, for the file's command line
}

func main() {
	quick := flag.Bool("quick", false, "smoke run: short benchtime, one count, small load runs")
	out := flag.String("o", "", "`file` to write (default BENCHMARKS.md at the module root)")
	count := flag.Int("count", 0, "go test -count (default 3, or 1 with -quick)")
	n := flag.Int("n", 0, "requests per load run (default 20000, or 300 with -quick)")
	flag.Parse()
	cfg := config{Quick: *quick, Out: *out, Count: 3, Bench: "1s", N: 20000, Clients: 32,
		Args: strings.Join(os.Args[1:], " ")}
	if cfg.Quick {
		cfg.Count, cfg.Bench, cfg.N = 1, "50ms", 300
	}
	if *count > 0 {
		cfg.Count = *count
	}
	if *n > 0 {
		cfg.N = *n
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// section is one measured step and the conditions it ran under.
type section struct {
	Title         string
	Command       string
	Before, After LoadAvg
	Took          time.Duration
	// Others is the CPU that processes other than this step's own used while it ran, in cores
	// (machine busy time less the step's own, over the wall time); negative when unknown.
	Others float64
	Err    error
}

// results is everything one report run measured.
type results struct {
	Cfg       config
	Start     time.Time
	Took      time.Duration
	Machine   machine
	Sections  []*section
	Benches   map[string]*BenchOutput // package → output
	Loads     map[string]*Load        // load run key → result
	Gate      *Gateload               // bench/gateload, or nil
	Gate8     *Gateload               // bench/gateload -c 8 -modes gated, or nil
	GateSpans *Gateload               // bench/gateload -spans, or nil
}

// A benchmark invocation per package, run one after another so they never share the CPU.
var benchRuns = []struct{ pkg, pattern string }{
	{"verdict", `^(BenchmarkRawEd25519Sign|BenchmarkRawEd25519Verify|BenchmarkSignEdDSA|BenchmarkVerifyEdDSA|BenchmarkVerifyEdDSAOverRaw|BenchmarkGoJoseVerifyOverRaw|BenchmarkVerifyDigestScale)$`},
	{"canonical", `^(BenchmarkDigestScale|BenchmarkReferenceJCSDigest1KiB)$`},
	{"gates", `^(BenchmarkPreflight|BenchmarkPreflightSlots|BenchmarkPreflightSlotsCold|BenchmarkFloorSchemaValidate|BenchmarkGroundToken|BenchmarkPreflightMostExpensive)$`},
	{"store", `^(BenchmarkFloorBoltUpdate|BenchmarkFloorFsync|BenchmarkDecisionAppendParallel)$`},
	{"nonce", `^BenchmarkNonceConsumeParallel$/^consume\+start$`},
	{"replay", `^BenchmarkReplay$`},
	{"policytest", `^BenchmarkRun1000Cases$`},
}

// A load run: which tool, with which flags, under which key in results.Loads.
type loadRun struct {
	key, tool string
	args      []string
	clients   int    // concurrency; 0 means the run's default (-c of the report, 32)
	needs     string // a binary that must be in PATH, or ""
}

var loadRuns = []loadRun{
	{key: "echo-bbolt", tool: "execload", args: []string{"-tool", "echo"}},
	{key: "balance-bbolt", tool: "execload", args: []string{"-tool", "get_balance"}},
	{key: "echo-etcd", tool: "execload", args: []string{"-tool", "echo", "-nonce", "etcd"}, needs: "etcd"},
	{key: "preflight", tool: "preflightload"},
	// Where verdictd's latency target holds: with fewer closed-loop clients the queue is shorter.
	{key: "preflight-c8", tool: "preflightload", clients: 8},
	// The cost of tracing: every span exported to a local OTLP sink, beside the runs above.
	{key: "preflight-traced", tool: "preflightload", args: []string{"-tracing"}},
	{key: "echo-bbolt-traced", tool: "execload", args: []string{"-tool", "echo", "-tracing"}},
}

func run(ctx context.Context, cfg config, log io.Writer) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cfg.Out = cmp.Or(cfg.Out, filepath.Join(root, "BENCHMARKS.md"))
	res := &results{Cfg: cfg, Start: time.Now(), Benches: map[string]*BenchOutput{}, Loads: map[string]*Load{}}
	res.Machine = describeMachine(ctx, root)

	for _, br := range benchRuns {
		args := []string{"test", "-run", "^$", "-bench", br.pattern, "-benchmem",
			"-count", fmt.Sprint(cfg.Count), "-benchtime", cfg.Bench, "./" + br.pkg + "/"}
		s := &section{Title: "go test " + br.pkg, Command: shellJoin(append([]string{"go"}, args...))}
		if bo := measureParse(ctx, s, log, root, ParseBench, "go", args...); bo != nil {
			res.Benches[br.pkg] = bo
			res.Machine.CPU = cmp.Or(res.Machine.CPU, bo.CPU)
		}
		res.Sections = append(res.Sections, s)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	bin, err := os.MkdirTemp("", "bench-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	built := map[string]error{}
	for _, lr := range loadRuns {
		args := append([]string{"-n", fmt.Sprint(cfg.N), "-c", fmt.Sprint(cmp.Or(lr.clients, cfg.Clients))}, lr.args...)
		s := &section{Title: "load " + lr.key,
			Command: shellJoin(append([]string{"go", "run", "./bench/" + lr.tool}, args...))}
		res.Sections = append(res.Sections, s)
		if lr.needs != "" {
			if _, err := exec.LookPath(lr.needs); err != nil {
				s.Err = fmt.Errorf("skipped: no %s in PATH", lr.needs)
				continue
			}
		}
		exe := filepath.Join(bin, lr.tool)
		if _, ok := built[lr.tool]; !ok {
			built[lr.tool] = goBuild(ctx, root, exe, "./bench/"+lr.tool)
		}
		if s.Err = built[lr.tool]; s.Err != nil {
			continue
		}
		if l := measureParse(ctx, s, log, root, ParseLoad, exe, args...); l != nil {
			res.Loads[lr.key] = l
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := runGateloads(ctx, cfg, res, log, root, bin); err != nil {
		return err
	}
	res.Took = time.Since(res.Start)

	var doc bytes.Buffer
	writeReport(&doc, res)
	if err := os.WriteFile(cfg.Out, doc.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "report: wrote %s in %s\n", cfg.Out, res.Took.Round(time.Second))
	var failed []string
	for _, s := range res.Sections {
		if s.Err != nil && !strings.HasPrefix(s.Err.Error(), "skipped") {
			failed = append(failed, s.Title)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not measured: %s (see the file and the output above)", strings.Join(failed, ", "))
	}
	return nil
}

// runGateloads runs bench/gateload three times and keeps what each run measured; only a
// cancelled run is an error.
func runGateloads(ctx context.Context, cfg config, res *results, log io.Writer, root, bin string) error {
	exe := filepath.Join(bin, "gateload")
	for i, gr := range []struct {
		key        string
		n, clients int
		args       []string
		dst        **Gateload
	}{
		{"gateway", max(cfg.N/gateNDivisor, 30), gateClients, nil, &res.Gate},
		// The gated call from eight clients: its throughput and CPU against its floors under load.
		{"gateway c8", max(cfg.N/gateNDivisor, 80), 8, []string{"-modes", "gated"}, &res.Gate8},
		// The breakdown of a gated call.
		{"gateway spans", max(cfg.N/(4*gateNDivisor), 30), gateClients, []string{"-modes", "direct,gated", "-spans"}, &res.GateSpans},
	} {
		args := append([]string{"-n", fmt.Sprint(gr.n), "-c", fmt.Sprint(gr.clients)}, gr.args...)
		s := &section{Title: "load " + gr.key, Command: shellJoin(append([]string{"go", "run", "./bench/gateload"}, args...))}
		res.Sections = append(res.Sections, s)
		if i == 0 {
			s.Err = goBuild(ctx, root, exe, "./bench/gateload") // once, for the three runs
		}
		if s.Err == nil {
			*gr.dst = measureParse(ctx, s, log, root, ParseGateload, exe, args...)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// measure runs one command in dir, its output teed to log, and records the load average around
// it and how long it took.
func measure(ctx context.Context, s *section, log io.Writer, dir, name string, args ...string) ([]byte, error) {
	fmt.Fprintf(log, "\n== %s\n$ %s\n", s.Title, s.Command)
	s.Before = loadAvg()
	busy0, busyOK := busyCPU()
	start := time.Now()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// The command's output and its errors are copied by two goroutines; one Write at a time
	// reaches log, whatever writer it is.
	lw := &syncWriter{w: log}
	cmd.Stdout = io.MultiWriter(&out, lw)
	cmd.Stderr = lw
	err := cmd.Run()
	s.Took = time.Since(start)
	s.After = loadAvg()
	s.Others = -1
	if busy1, ok := busyCPU(); ok && busyOK && cmd.ProcessState != nil && s.Took > 0 {
		own := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		s.Others = max(0, (busy1-busy0-own).Seconds()/s.Took.Seconds())
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w", s.Command, err)
	}
	return out.Bytes(), nil
}

// measureParse measures one command (see measure) and parses its output; it returns nil, with
// the step's error set, when either fails.
func measureParse[T any](ctx context.Context, s *section, log io.Writer, dir string, parse func(io.Reader) (*T, error), name string, args ...string) *T {
	out, err := measure(ctx, s, log, dir, name, args...)
	var v *T
	if err == nil {
		v, err = parse(bytes.NewReader(out))
	}
	s.Err = err
	return v
}

// syncWriter lets several goroutines write one writer, one Write at a time.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func goBuild(ctx context.Context, root, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// moduleRoot is the directory of the main module's go.mod, so the report runs from anywhere in
// the module.
func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

// machine is what the file says about where it was measured.
type machine struct {
	CPUs      int
	CPU       string
	GoVersion string
	Kernel    string
	Commit    string
}

func describeMachine(ctx context.Context, root string) machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: "unknown", Kernel: runtime.GOOS, Commit: "unknown"}
	if b, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel += " " + strings.TrimSpace(string(b))
	}
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty")
	cmd.Dir = root
	if b, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
	}
	return m
}

// loadAvg reads the 1, 5 and 15 minute load averages (Linux).
func loadAvg() LoadAvg {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unavailable"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unavailable"
	}
	return LoadAvg(strings.Join(f[:3], " "))
}

// busyCPU is the CPU time the whole machine has spent busy since boot, from /proc/stat (Linux),
// in the kernel's usual 100 ticks per second.
func busyCPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, true
}

// shellJoin quotes args for a POSIX shell where needed, so a printed command can be pasted.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,", r))
		}) < 0 {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
