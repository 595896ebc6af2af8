package main

import (
	"fmt"
	"io"
	"runtime"
	"time"
)

// cpuOrder is the order processes are printed in.
var cpuOrder = []string{"load", "bank", "mcpgate", "verdictd", "executor"}

// report prints, for every mode, one "mode" line (calls, throughput, latency, the p50 against
// direct's) and one "cpu" line (CPU per call of every process, in µs). bench/report parses
// both: keep them key=value.
func report(w io.Writer, o options, s *stack, tallies map[string]*tally, asked int64) {
	fmt.Fprintf(w, "gateload: %d calls per mode, clients=%d, turns of %d, %d cores, questions asked %d\n",
		o.n, o.clients, o.block, runtime.NumCPU(), asked)
	var direct time.Duration
	if t := tallies["direct"]; t != nil {
		direct = t.result().Pct(0.50)
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
	for _, m := range o.modes {
		t := tallies[m]
		r := t.result()
		p50 := r.Pct(0.50)
		fmt.Fprintf(w, "mode %s: calls=%d failed=%d throughput=%.0f/s p50=%s p90=%s p99=%s max=%s",
			m, r.N, r.Bad, float64(r.N)/r.Elapsed.Seconds(), us(p50), us(r.Pct(0.90)), us(r.Pct(0.99)), us(r.Pct(1)))
		if direct > 0 {
			fmt.Fprintf(w, " vs_direct=%.2fx added=%s", float64(p50)/float64(direct), us(p50-direct))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "cpu %s:", m)
		var total time.Duration
		for _, name := range cpuOrder {
			per := t.cpu[name] / time.Duration(max(r.N, 1))
			total += per
			fmt.Fprintf(w, " %s=%s", name, us(per))
		}
		fmt.Fprintf(w, " total=%s\n", us(total))
	}
}
