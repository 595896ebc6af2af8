package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bench is one benchmark's results over every run of a go test -count invocation.
type Bench struct {
	Name string               // as printed, without the -GOMAXPROCS suffix: "BenchmarkDigestScale/size=1KiB"
	Runs []map[string]float64 // per run: unit → value ("ns/op", "allocs/op", "x-raw", "p50-µs", …)
}

// Median returns the median of unit over the runs that report it.
func (b *Bench) Median(unit string) (float64, bool) {
	if b == nil {
		return 0, false
	}
	var vs []float64
	for _, r := range b.Runs {
		if v, ok := r[unit]; ok {
			vs = append(vs, v)
		}
	}
	return median(vs)
}

// median sorts vs and returns its median, or false when vs is empty.
func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

// BenchOutput is what one go test -bench invocation printed.
type BenchOutput struct {
	CPU     string
	Benches []*Bench // in the order first seen
}

// Get returns the named benchmark (name without the -GOMAXPROCS suffix), or nil.
func (o *BenchOutput) Get(name string) *Bench {
	if o == nil {
		return nil
	}
	for _, b := range o.Benches {
		if b.Name == name {
			return b
		}
	}
	return nil
}

var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// ParseBench reads go test -bench output in the standard benchmark format: lines of a name, an
// iteration count and value-unit pairs. Other lines (goos, PASS, ok, logs) are skipped, except
// "cpu:", which is kept. A benchmark line that does not parse is an error, since a silently
// dropped result would leave a hole in the report.
func ParseBench(r io.Reader) (*BenchOutput, error) {
	out := &BenchOutput{}
	byName := map[string]*Bench{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if cpu, ok := strings.CutPrefix(text, "cpu: "); ok {
			out.CPU = strings.TrimSpace(cpu)
			continue
		}
		if !strings.HasPrefix(text, "Benchmark") {
			continue
		}
		f := strings.Fields(text)
		if len(f) < 2 {
			continue // a name alone: the line before a sub-benchmark's output or a log
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // "BenchmarkX	some log text"
		}
		if len(f) < 4 || len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: malformed benchmark line %q", line, text)
		}
		run := make(map[string]float64, (len(f)-2)/2)
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: value %q of %s: %w", line, f[i], f[i+1], err)
			}
			run[f[i+1]] = v
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		b := byName[name]
		if b == nil {
			b = &Bench{Name: name}
			byName[name] = b
			out.Benches = append(out.Benches, b)
		}
		b.Runs = append(b.Runs, run)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Load is one closed-loop load run as bench/internal/loadgen prints it.
type Load struct {
	What       string // "executions of echo (nonces in bbolt)"
	N, Bad     int
	Clients    int
	Throughput float64 // per second
	Over       time.Duration
	P50, P90   time.Duration
	P99, Max   time.Duration
}

var (
	loadHead = regexp.MustCompile(`^(.+): (\d+) \(non-200: (\d+)\) clients=(\d+)$`)
	loadRate = regexp.MustCompile(`^throughput: ([0-9.]+)/s over (\S+)$`)
	loadLat  = regexp.MustCompile(`^latency: p50 (\S+)\s+p90 (\S+)\s+p99 (\S+)\s+max (\S+)$`)
)

// ParseLoad reads the summary a load tool printed (three lines: what and how many, throughput,
// latency percentiles). Other lines are skipped; a missing summary line is an error.
func ParseLoad(r io.Reader) (*Load, error) {
	var l Load
	var head, rate, lat bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if m := loadHead.FindStringSubmatch(text); m != nil {
			l.What = m[1]
			l.N, _ = strconv.Atoi(m[2])
			l.Bad, _ = strconv.Atoi(m[3])
			l.Clients, _ = strconv.Atoi(m[4])
			head = true
		} else if m := loadRate.FindStringSubmatch(text); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return nil, fmt.Errorf("throughput %q: %w", m[1], err)
			}
			if l.Over, err = time.ParseDuration(m[2]); err != nil {
				return nil, fmt.Errorf("elapsed: %w", err)
			}
			l.Throughput = v
			rate = true
		} else if m := loadLat.FindStringSubmatch(text); m != nil {
			for i, dst := range []*time.Duration{&l.P50, &l.P90, &l.P99, &l.Max} {
				d, err := time.ParseDuration(m[i+1])
				if err != nil {
					return nil, fmt.Errorf("latency: %w", err)
				}
				*dst = d
			}
			lat = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !head || !rate || !lat {
		return nil, fmt.Errorf("no load summary in the output (header %v, throughput %v, latency %v)", head, rate, lat)
	}
	return &l, nil
}

// LoadAvg is /proc/loadavg's first three figures, or "unavailable".
type LoadAvg string
