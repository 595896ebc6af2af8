package main

import (
	"bufio"
	"fmt"
	"io"
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
}

// ParseGateload reads gateload's output: a "mode NAME: key=value …" line and a "cpu NAME:
// process=µs …" line per mode. Other lines are skipped; no mode line is an error.
func ParseGateload(r io.Reader) (*Gateload, error) {
	var g Gateload
	byName := map[string]*GateMode{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		kind, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
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
	p("run. CPU per call is each process's `/proc` time over that mode's turns only.\n\n")
	var s *section
	for _, x := range r.Sections {
		if x.Title == "load gateway" {
			s = x
		}
	}
	if s == nil {
		return
	}
	if r.Gate == nil {
		why := notMeasured
		if s.Err != nil {
			why = oneLine(s.Err.Error())
		}
		p("`%s`: %s\n\n", s.Command, why)
		return
	}
	p("`%s`\n\n", s.Command)
	p("| call | calls | failed | throughput | p50 | p90 | p99 | p50 vs direct | added p50 | CPU: mcpgate | bank | verdictd | executor | host |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, m := range r.Gate.Modes {
		what := gateModes[m.Name]
		if what == "" {
			what = m.Name
		}
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
}
