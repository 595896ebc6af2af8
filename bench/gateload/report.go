package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/verdictgate/verdict/bench/internal/loadgen"
)

// cpuOrder is the order processes are printed in.
var cpuOrder = []string{"load", "bank", "mcpgate", "verdictd", "executor"}

// daemons are the processes a gated call adds to a direct one, whose CPU the ratio and floor
// lines compare.
var daemons = []string{"mcpgate", "verdictd", "executor"}

// report prints, for every mode and side, one "mode" line (calls, throughput, latency, the p50
// against the same side's direct) and one "cpu" line (CPU per call of every process, in µs),
// the base side's named MODE@base. With a base it then prints a "ratio" line per mode, the
// current side over the base; with floors, a "floor" line and a "floor_ratio" line per side
// that ran gated. bench/report parses the mode and cpu lines: keep every line key=value.
func report(w io.Writer, head string, modes []string, sides []*side, floor *floorTally) {
	fmt.Fprintln(w, head)
	for _, m := range modes {
		for _, sd := range sides {
			writeMode(w, m+sd.suffix, sd.tallies[m], sd.direct())
		}
	}
	if len(sides) == 2 {
		for _, m := range modes {
			writeRatio(w, m, sides[0].stats(m), sides[1].stats(m))
		}
	}
	if floor == nil || floor.commits == 0 {
		return
	}
	commitCPU, commitWall := floor.perCommit()
	fmt.Fprintf(w, "floor: commit_cpu=%s commit_wall=%s sign=%s verify=%s gated_floor=%s\n",
		us1(commitCPU), us1(commitWall), us1(floor.perSign()), us1(floor.perVerify()), us1(floor.gated()))
	if !slices.Contains(modes, "gated") {
		return
	}
	for _, sd := range sides {
		d := sd.stats("gated").daemons
		fmt.Fprintf(w, "floor_ratio gated%s: daemons_cpu=%s ratio=%s\n", sd.suffix, us(d), ratio(float64(d), float64(floor.gated())))
	}
}

// writeMode prints a mode's "mode" and "cpu" lines; direct is the side's direct p50, or 0.
func writeMode(w io.Writer, name string, t *tally, direct time.Duration) {
	r := t.result()
	p50 := r.Pct(0.50)
	fmt.Fprintf(w, "mode %s: calls=%d failed=%d throughput=%.0f/s p50=%s p90=%s p99=%s max=%s",
		name, r.N, r.Bad, throughput(r), us(p50), us(r.Pct(0.90)), us(r.Pct(0.99)), us(r.Pct(1)))
	if direct > 0 {
		fmt.Fprintf(w, " vs_direct=%.2fx added=%s", float64(p50)/float64(direct), us(p50-direct))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "cpu %s:", name)
	var total time.Duration
	for _, name := range cpuOrder {
		per := t.perCall(name)
		total += per
		fmt.Fprintf(w, " %s=%s", name, us(per))
	}
	fmt.Fprintf(w, " total=%s\n", us(total))
}

// modeStats is what a ratio line compares of one mode on one side.
type modeStats struct {
	daemons    time.Duration // mcpgate, verdictd and executor CPU per call
	p50        time.Duration
	added      time.Duration // p50 less the side's direct p50
	hasAdded   bool          // whether direct ran
	throughput float64
}

// writeRatio prints mode m's "ratio" line: each figure of the current side over the base's.
func writeRatio(w io.Writer, m string, cur, base modeStats) {
	fmt.Fprintf(w, "ratio %s: daemons_cpu=%s p50=%s", m,
		ratio(float64(cur.daemons), float64(base.daemons)), ratio(float64(cur.p50), float64(base.p50)))
	if cur.hasAdded && base.hasAdded {
		fmt.Fprintf(w, " added=%s", ratio(float64(cur.added), float64(base.added)))
	}
	fmt.Fprintf(w, " throughput=%s\n", ratio(cur.throughput, base.throughput))
}

// ratio is cur over base as X.XXx, or n/a when base is not positive (direct's added time, an
// idle daemon's CPU under the 10 ms tick of /proc).
func ratio(cur, base float64) string {
	if base <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", cur/base)
}

// throughput is calls per second over the time the turns took.
func throughput(r loadgen.Result) float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.N) / r.Elapsed.Seconds()
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

// us1 is us to a tenth: the floors' operations take tens of microseconds.
func us1(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond)) }

// turnOrder is the order the sides run each mode in turn i: it rotates, so that with a base
// the current side goes first in even turns and second in odd ones, and neither side always
// follows the other.
func turnOrder(i, sides int) []int {
	order := make([]int, sides)
	for k := range order {
		order[k] = (i + k) % sides
	}
	return order
}
