package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gateRun is how the report runs bench/gateload: one client, so that the figures are a host's
// latency and not a queue's; -n is the report's requests per load run over gateNDivisor.
const (
	gateClients  = 1
	gateNDivisor = 10
)

// GateMode is one mode of a gateload run: its "mode" line and its "cpu" line.
type GateMode struct {
	Name          string
	Calls, Failed int
	Throughput    float64 // per second
	P50, P90, P99 time.Duration
	VsDirect      float64       // p50 over direct's; 0 when direct did not run
	Added         time.Duration // p50 less direct's
	CPU           map[string]time.Duration
}

// Gateload is what bench/gateload printed.
type Gateload struct {
	Modes []*GateMode
	Spans []GateSpan // with -spans
	// Floor is the "floor:" line (commit_cpu, commit_wall, sign, verify, gated_floor), nil
	// when the run had none; FloorRatio the gated call's daemons' CPU per call over
	// gated_floor, by mode ("gated", "gated@base").
	Floor      map[string]time.Duration
	FloorRatio map[string]float64
}

// GateSpan is one "span" line of a -spans run: a daemon's span and its durations.
type GateSpan struct {
	Service, Name string
	N             int
	P50, P90      time.Duration
}

// ParseGateload reads gateload's output: a "mode NAME: key=value …" line and a "cpu NAME:
// process=µs …" line per mode. Other lines are skipped; no mode line is an error.
func ParseGateload(r io.Reader) (*Gateload, error) {
	var g Gateload
	byName := map[string]*GateMode{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		kind, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if ok && kind == "span" {
			sp, err := parseSpan(rest)
			if err != nil {
				return nil, err
			}
			g.Spans = append(g.Spans, sp)
			continue
		}
		if ok && (kind == "floor:" || kind == "floor_ratio") {
			if err := g.setFloor(kind, rest); err != nil {
				return nil, err
			}
			continue
		}
		if !ok || (kind != "mode" && kind != "cpu") {
			continue
		}
		name, fields, ok := strings.Cut(rest, ": ")
		if !ok {
			continue
		}
		m := byName[name]
		if m == nil {
			m = &GateMode{Name: name, CPU: map[string]time.Duration{}}
			byName[name] = m
			g.Modes = append(g.Modes, m)
		}
		for _, f := range strings.Fields(fields) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("%s %s: field %q is not key=value", kind, name, f)
			}
			if err := m.set(kind, k, v); err != nil {
				return nil, fmt.Errorf("%s %s: %s: %w", kind, name, k, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(g.Modes) == 0 {
		return nil, fmt.Errorf("no gateload mode line in the output")
	}
	return &g, nil
}

// setFloor reads a "floor:" line (key=duration …) or a "floor_ratio MODE: daemons_cpu=D
// ratio=R" line.
func (g *Gateload) setFloor(kind, rest string) error {
	fields := rest
	mode := ""
	if kind == "floor_ratio" {
		var ok bool
		if mode, fields, ok = strings.Cut(rest, ": "); !ok {
			return fmt.Errorf("floor_ratio %q: no fields", rest)
		}
	}
	for _, f := range strings.Fields(fields) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("%s %q: field %q is not key=value", kind, rest, f)
		}
		switch {
		case kind == "floor:":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("floor: %s: %w", k, err)
			}
			if g.Floor == nil {
				g.Floor = map[string]time.Duration{}
			}
			g.Floor[k] = d
		case k == "ratio":
			r, err := strconv.ParseFloat(strings.TrimSuffix(v, "x"), 64)
			if err != nil {
				return fmt.Errorf("floor_ratio %s: %w", mode, err)
			}
			if g.FloorRatio == nil {
				g.FloorRatio = map[string]float64{}
			}
			g.FloorRatio[mode] = r
		}
	}
	return nil
}

// parseSpan reads what follows "span": SERVICE "NAME": n=N p50=D p90=D.
func parseSpan(line string) (GateSpan, error) {
	var sp GateSpan
	service, rest, ok := strings.Cut(line, " ")
	if !ok {
		return sp, fmt.Errorf("span %q: no name", line)
	}
	name, fields, ok := strings.Cut(rest, ": ")
	if !ok {
		return sp, fmt.Errorf("span %q: no fields", line)
	}
	unq, err := strconv.Unquote(name)
	if err != nil {
		return sp, fmt.Errorf("span %q: name: %w", line, err)
	}
	sp.Service, sp.Name = service, unq
	for _, f := range strings.Fields(fields) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return sp, fmt.Errorf("span %q: field %q is not key=value", line, f)
		}
		switch k {
		case "n":
			sp.N, err = strconv.Atoi(v)
		case "p50":
			sp.P50, err = time.ParseDuration(v)
		case "p90":
			sp.P90, err = time.ParseDuration(v)
		}
		if err != nil {
			return sp, fmt.Errorf("span %q: %s: %w", line, k, err)
		}
	}
	return sp, nil
}

// span returns the p50 of service's span name, and whether the run had it.
func (g *Gateload) span(service, name string) (time.Duration, bool) {
	for _, sp := range g.Spans {
		if sp.Service == service && sp.Name == name {
			return sp.P50, true
		}
	}
	return 0, false
}

func (m *GateMode) set(kind, k, v string) error {
	var err error
	if kind == "cpu" {
		m.CPU[k], err = time.ParseDuration(v)
		return err
	}
	switch k {
	case "calls":
		m.Calls, err = strconv.Atoi(v)
	case "failed":
		m.Failed, err = strconv.Atoi(v)
	case "throughput":
		m.Throughput, err = strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
	case "p50":
		m.P50, err = time.ParseDuration(v)
	case "p90":
		m.P90, err = time.ParseDuration(v)
	case "p99":
		m.P99, err = time.ParseDuration(v)
	case "vs_direct":
		m.VsDirect, err = strconv.ParseFloat(strings.TrimSuffix(v, "x"), 64)
	case "added":
		m.Added, err = time.ParseDuration(v)
	}
	return err
}

// gateModes says what each gateload mode is, in the report's words.
var gateModes = map[string]string{
	"direct": "`get_balance` straight to the bank",
	"read":   "`get_balance` through the gateway's read pass-through",
	"gated":  "gated call, no question (gateway, verdictd, executor)",
}

func (r *results) writeGateway(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("## Load: the gateway in front of an MCP server\n\n")
	p("`bench/gateload`: a go-sdk client (one session to the bank, one to mcpgate, over streamable HTTP)\n")
	p("calls the example bank directly, through the gateway's read pass-through, and through a gated call\n")
	p("that verdictd and the executor settle without a question, the three in turns of 100 calls in one\n")
	p("run. CPU per call is each process's `/proc` time over that mode's turns only. Between turns it\n")
	p("also measures, in its own process, the floor under a gated call's CPU (three durable bbolt\n")
	p("commits, two ed25519 signatures and two verifications) and prints the daemons' CPU per gated\n")
	p("call against it; with `-base REV` it builds a second stack from that revision and runs it in the\n")
	p("same turns, alternating which goes first, to print each mode's ratios to the base.\n\n")
	s := r.section("load gateway")
	if s == nil {
		return
	}
	if r.Gate == nil {
		p("`%s`: %s\n\n", s.Command, s.why())
		return
	}
	p("`%s`\n\n", s.Command)
	p("| call | calls | failed | throughput | p50 | p90 | p99 | p50 vs direct | added p50 | CPU: mcpgate | bank | verdictd | executor | host |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, m := range r.Gate.Modes {
		what := cmp.Or(gateModes[m.Name], m.Name)
		ratio, added := "—", "—"
		if m.VsDirect > 0 && m.Name != "direct" {
			ratio, added = formatRatio(m.VsDirect), formatDur(m.Added)
		}
		cpu := func(name string) string {
			if m.CPU[name] == 0 {
				return "0" // under the 10 ms tick of /proc over the whole run
			}
			return formatDur(m.CPU[name])
		}
		p("| %s | %s | %d | %s/s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", what,
			formatCount(float64(m.Calls)), m.Failed, formatCount(m.Throughput), formatDur(m.P50), formatDur(m.P90),
			formatDur(m.P99), ratio, added, cpu("mcpgate"), cpu("bank"), cpu("verdictd"), cpu("executor"), cpu("load"))
	}
	p("\n")
	r.writeGateFloors(p)
	r.writeGateSpans(w)
}

// writeGateFloors writes the gated call's CPU against the floors measured in the same runs, at
// one client and (a run of its own) at eight.
func (r *results) writeGateFloors(p printf) {
	runs := []struct {
		g       *Gateload
		clients string
		title   string
	}{{r.Gate, "1 client", "load gateway"}, {r.Gate8, "8 clients", "load gateway c8"}}
	wrote := false
	for _, run := range runs {
		g := run.g
		if g == nil || g.Floor == nil || g.FloorRatio["gated"] == 0 {
			if s := r.section(run.title); s != nil && run.g == nil {
				p("`%s`: %s\n\n", s.Command, s.why())
			}
			continue
		}
		if !wrote {
			p("### The gated call against its floors\n\n")
			p("| clients | gated throughput | daemons' CPU per call | floor per call | ratio | one commit (CPU, wall) | sign | verify | command |\n")
			p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
			wrote = true
		}
		gated := g.Modes[slices.IndexFunc(g.Modes, func(m *GateMode) bool { return m.Name == "gated" })]
		daemons := gated.CPU["mcpgate"] + gated.CPU["verdictd"] + gated.CPU["executor"]
		cmd := ""
		if s := r.section(run.title); s != nil {
			cmd = "`" + s.Command + "`"
		}
		p("| %s | %s/s | %s | %s | **%s** | %s, %s | %s | %s | %s |\n", run.clients, formatCount(gated.Throughput),
			formatDur(daemons), formatDur(g.Floor["gated_floor"]), formatRatio(g.FloorRatio["gated"]),
			formatDur(g.Floor["commit_cpu"]), formatDur(g.Floor["commit_wall"]), formatDur(g.Floor["sign"]),
			formatDur(g.Floor["verify"]), cmd)
	}
	if wrote {
		p("\nThe floor is what a gated call cannot go under, measured in the load tool's own thread between\n")
		p("turns of the same run: three durable bbolt commits (verdictd's decision record, the executor's\n")
		p("start and finish), two ed25519 signatures and two verifications; the daemons' CPU also pays\n")
		p("the receipt's commit, HTTP, JSON, logging and garbage collection. To set a change against its\n")
		p("base in one run: `go run ./bench/gateload -n 2000 -c 1 -base main` (and `-c 8`).\n\n")
	}
}

// writeGateSpans writes where a gated call's wall time goes, from a -spans run, and what its
// three durable commits alone take of it.
func (r *results) writeGateSpans(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	s := r.section("load gateway spans")
	if s == nil {
		return
	}
	p("### Where a gated call's time goes\n\n")
	if r.GateSpans == nil || len(r.GateSpans.Spans) == 0 {
		p("`%s`: %s\n\n", s.Command, s.why())
		return
	}
	p("The daemons' own spans, exported to a local OTLP endpoint that keeps their durations, in a\n")
	p("second run with tracing on (which costs CPU of its own, and sends the executor's upstream call\n")
	p("through the MCP library rather than its plain path): the p50 of each span, nested as they\n")
	p("nest. `go run ./bench/gateload -spans` prints the same.\n\n")
	p("`%s`\n\n", s.Command)
	for _, m := range r.GateSpans.Modes {
		if m.Name == "gated" {
			p("In this run the gated call's p50 was %s, %s over direct.\n\n", formatDur(m.P50), formatDur(m.Added))
		}
	}
	p("| daemon | span | calls | p50 | p90 |\n| --- | --- | ---: | ---: | ---: |\n")
	for _, sp := range r.GateSpans.Spans {
		p("| %s | `%s` | %s | %s | %s |\n", sp.Service, sp.Name, formatCount(float64(sp.N)), formatDur(sp.P50), formatDur(sp.P90))
	}
	p("\n")
	rec, ok1 := r.GateSpans.span("verdictd", "store record")
	start, ok2 := r.GateSpans.span("executor", "commit start")
	finish, ok3 := r.GateSpans.span("executor", "commit finish")
	if !ok1 || !ok2 || !ok3 {
		return
	}
	sum := rec + start + finish
	p("A gated call waits on three durable commits in turn, each a bbolt transaction (two fsyncs,\n")
	p("data then meta): verdictd's decision record (`store record`, %s) before the verdict leaves it,\n", formatDur(rec))
	p("the executor's nonce and `started` record (`commit start`, %s) before the tool is called, and\n", formatDur(start))
	p("its outcome (`commit finish`, %s) before it answers: **%s** at p50 under this run's own load", formatDur(finish), formatDur(sum))
	if floor, ok := r.med("store", "BenchmarkFloorBoltUpdate", "p50-µs"); ok {
		p(",\n%s at the idle floor of one bbolt `Update` (%s each, [above](#floors-in-this-run))",
			formatDur(3*time.Duration(floor*1e3)), formatDur(time.Duration(floor*1e3)))
	}
	p(". Each of the three also\ncosts a loopback HTTP exchange on top of what a direct call makes, which the read pass-through's\n")
	p("added p50 bounds from below.\n\n")
}
