package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

const µs = time.Microsecond

// mkTally is a tally of calls with the given latencies in µs, over elapsed, with total CPU
// time per process.
func mkTally(lat []int, elapsed time.Duration, cpu map[string]time.Duration) *tally {
	t := &tally{elapsed: elapsed, cpu: cpu}
	for _, l := range lat {
		t.lat = append(t.lat, time.Duration(l)*µs)
	}
	return t
}

func TestReport(t *testing.T) {
	direct := func() *tally {
		return mkTally([]int{3000, 1000, 2000}, 3*time.Millisecond, map[string]time.Duration{"load": 300 * µs, "bank": 600 * µs})
	}
	cur := &side{tallies: map[string]*tally{
		"direct": direct(),
		"gated": mkTally([]int{10000, 12000, 14000}, 36*time.Millisecond, map[string]time.Duration{
			"load": 300 * µs, "bank": 600 * µs, "mcpgate": 3000 * µs, "verdictd": 6000 * µs, "executor": 9000 * µs}),
	}}
	base := &side{suffix: "@base", tallies: map[string]*tally{
		"direct": direct(),
		"gated": mkTally([]int{14000, 16000, 18000}, 45*time.Millisecond, map[string]time.Duration{
			"load": 300 * µs, "bank": 600 * µs, "mcpgate": 6000 * µs, "verdictd": 6000 * µs, "executor": 12000 * µs}),
	}}
	floor := &floorTally{commits: 10, commitCPU: 1000 * µs, commitWall: 5000 * µs, sigs: 100, signCPU: 2000 * µs, verifyCPU: 5000 * µs}
	modes := []string{"direct", "gated"}
	lines := map[string]string{
		"direct": "mode direct: calls=3 failed=0 throughput=1000/s p50=2000µs p90=2000µs p99=2000µs max=3000µs vs_direct=1.00x added=0µs\n" +
			"cpu direct: load=100µs bank=200µs mcpgate=0µs verdictd=0µs executor=0µs total=300µs\n",
		"direct@base": "mode direct@base: calls=3 failed=0 throughput=1000/s p50=2000µs p90=2000µs p99=2000µs max=3000µs vs_direct=1.00x added=0µs\n" +
			"cpu direct@base: load=100µs bank=200µs mcpgate=0µs verdictd=0µs executor=0µs total=300µs\n",
		"gated": "mode gated: calls=3 failed=0 throughput=83/s p50=12000µs p90=12000µs p99=12000µs max=14000µs vs_direct=6.00x added=10000µs\n" +
			"cpu gated: load=100µs bank=200µs mcpgate=1000µs verdictd=2000µs executor=3000µs total=6300µs\n",
		"gated@base": "mode gated@base: calls=3 failed=0 throughput=67/s p50=16000µs p90=16000µs p99=16000µs max=18000µs vs_direct=8.00x added=14000µs\n" +
			"cpu gated@base: load=100µs bank=200µs mcpgate=2000µs verdictd=2000µs executor=4000µs total=8300µs\n",
	}
	for _, tc := range []struct {
		name  string
		modes []string
		sides []*side
		floor *floorTally
		want  string
	}{
		{"one stack", modes, []*side{cur}, nil, "head\n" + lines["direct"] + lines["gated"]},
		{"one stack, floors", modes, []*side{cur}, floor, "head\n" + lines["direct"] + lines["gated"] +
			"floor: commit_cpu=100.0µs commit_wall=500.0µs sign=20.0µs verify=50.0µs gated_floor=440.0µs\n" +
			"floor_ratio gated: daemons_cpu=6000µs ratio=13.64x\n"},
		{"base, floors", modes, []*side{cur, base}, floor, "head\n" +
			lines["direct"] + lines["direct@base"] + lines["gated"] + lines["gated@base"] +
			"ratio direct: daemons_cpu=n/a p50=1.00x added=n/a throughput=1.00x\n" +
			"ratio gated: daemons_cpu=0.75x p50=0.75x added=0.71x throughput=1.25x\n" +
			"floor: commit_cpu=100.0µs commit_wall=500.0µs sign=20.0µs verify=50.0µs gated_floor=440.0µs\n" +
			"floor_ratio gated: daemons_cpu=6000µs ratio=13.64x\n" +
			"floor_ratio gated@base: daemons_cpu=8000µs ratio=18.18x\n"},
		{"base without direct", []string{"gated"}, []*side{
			{tallies: map[string]*tally{"gated": cur.tallies["gated"]}},
			{suffix: "@base", tallies: map[string]*tally{"gated": base.tallies["gated"]}}}, nil, "head\n" +
			strings.Replace(lines["gated"], " vs_direct=6.00x added=10000µs", "", 1) +
			strings.Replace(lines["gated@base"], " vs_direct=8.00x added=14000µs", "", 1) +
			"ratio gated: daemons_cpu=0.75x p50=0.75x throughput=1.25x\n"},
		{"floors, no gated", []string{"direct"}, []*side{cur}, floor, "head\n" + lines["direct"] +
			"floor: commit_cpu=100.0µs commit_wall=500.0µs sign=20.0µs verify=50.0µs gated_floor=440.0µs\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			report(&b, "head", tc.modes, tc.sides, tc.floor)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		cur, base float64
		want      string
	}{
		{3, 2, "1.50x"},
		{0, 2, "0.00x"},
		{-1, 2, "-0.50x"}, // a p50 added under the base's direct
		{2, 0, "n/a"},
		{0, 0, "n/a"},
		{2, -1, "n/a"},
	} {
		if got := ratio(tc.cur, tc.base); got != tc.want {
			t.Errorf("ratio(%v, %v) = %s, want %s", tc.cur, tc.base, got, tc.want)
		}
	}
}

func TestTurnOrder(t *testing.T) {
	for _, tc := range []struct {
		turn, sides int
		want        []int
	}{
		{0, 1, []int{0}},
		{1, 1, []int{0}},
		{0, 2, []int{0, 1}},
		{1, 2, []int{1, 0}},
		{2, 2, []int{0, 1}},
		{7, 2, []int{1, 0}},
	} {
		if got := turnOrder(tc.turn, tc.sides); !slices.Equal(got, tc.want) {
			t.Errorf("turnOrder(%d, %d) = %v, want %v", tc.turn, tc.sides, got, tc.want)
		}
	}
}

func TestFloorTally(t *testing.T) {
	for _, tc := range []struct {
		name  string
		t     floorTally
		gated time.Duration
	}{
		{"nothing measured", floorTally{}, 0},
		{"three commits, two signatures, two verifications",
			floorTally{commits: 4, commitCPU: 800 * µs, commitWall: 4000 * µs, sigs: 10, signCPU: 250 * µs, verifyCPU: 600 * µs},
			3*200*µs + 2*25*µs + 2*60*µs},
	} {
		if got := tc.t.gated(); got != tc.gated {
			t.Errorf("%s: gated floor %s, want %s", tc.name, got, tc.gated)
		}
	}
}
