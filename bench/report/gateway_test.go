package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseGateload(t *testing.T) {
	g, err := ParseGateload(openTestdata(t, "gateload.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Modes) != 3 {
		t.Fatalf("%d modes, want 3", len(g.Modes))
	}
	read := g.Modes[1]
	if read.Name != "read" || read.Calls != 300 || read.Throughput != 183 || read.P50 != 4509*time.Microsecond ||
		read.VsDirect != 2.44 || read.Added != 2664*time.Microsecond || read.CPU["mcpgate"] != 3067*time.Microsecond {
		t.Errorf("read mode: %+v", read)
	}
	for _, bad := range []string{
		"gateload: ran\n",
		"mode read: calls=x\n",
		"mode read: calls\n",
		"cpu read: mcpgate=12\n",
	} {
		if _, err := ParseGateload(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestParseGateloadBase reads a -base run: the base's lines are modes of their own, named
// MODE@base, and the ratio and floor lines are skipped.
func TestParseGateloadBase(t *testing.T) {
	out := `gateload: 200 calls per mode, clients=1, turns of 100, 2 cores, questions asked 0, base HEAD~1 (140be8aa1c55)
mode gated: calls=200 failed=0 throughput=60/s p50=15000µs p90=20000µs p99=30000µs max=40000µs
cpu gated: load=1000µs bank=2000µs mcpgate=4000µs verdictd=5000µs executor=6000µs total=18000µs
mode gated@base: calls=200 failed=0 throughput=50/s p50=18000µs p90=22000µs p99=33000µs max=45000µs
cpu gated@base: load=1000µs bank=2000µs mcpgate=5000µs verdictd=5000µs executor=6000µs total=19000µs
ratio gated: daemons_cpu=0.94x p50=0.83x throughput=1.20x
floor: commit_cpu=142.3µs commit_wall=1187.5µs sign=31.2µs verify=68.9µs gated_floor=627.1µs
floor_ratio gated: daemons_cpu=15000µs ratio=23.92x
floor_ratio gated@base: daemons_cpu=16000µs ratio=25.51x
`
	g, err := ParseGateload(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Modes) != 2 || g.Modes[0].Name != "gated" || g.Modes[1].Name != "gated@base" ||
		g.Modes[1].P50 != 18*time.Millisecond || g.Modes[1].CPU["mcpgate"] != 5*time.Millisecond {
		t.Errorf("modes %+v %+v", g.Modes[0], g.Modes[len(g.Modes)-1])
	}
	if g.Floor["commit_cpu"] != 142300*time.Nanosecond || g.Floor["gated_floor"] != 627100*time.Nanosecond ||
		g.FloorRatio["gated"] != 23.92 || g.FloorRatio["gated@base"] != 25.51 {
		t.Errorf("floors %v, ratios %v", g.Floor, g.FloorRatio)
	}
	for _, bad := range []string{"mode gated: calls=1\nfloor: commit_cpu=x\n", "mode gated: calls=1\nfloor_ratio gated: ratio=y\n", "mode gated: calls=1\nfloor_ratio gated\n"} {
		if _, err := ParseGateload(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestWriteGateway(t *testing.T) {
	g, err := ParseGateload(openTestdata(t, "gateload.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		res  *results
		want string
	}{
		{"measured", &results{Gate: g, Sections: []*section{{Title: "load gateway", Command: "go run ./bench/gateload -n 300 -c 1"}}},
			"| `get_balance` through the gateway's read pass-through | 300 | 0 | 183/s | 4.51 ms | 8.46 ms | 14.9 ms | 2.44× | 2.66 ms | 3.07 ms | 1.93 ms | 0 | 0 | 1.33 ms |"},
		{"against the floors", &results{Gate: g, Gate8: g, Sections: []*section{{Title: "load gateway", Command: "go run ./bench/gateload -n 300 -c 1"},
			{Title: "load gateway c8", Command: "go run ./bench/gateload -n 300 -c 8 -modes gated"}}},
			"| 8 clients | 47/s | 16.4 ms | 627 µs | **26.1×** | 142 µs, 1.19 ms | 31.2 µs | 68.9 µs | `go run ./bench/gateload -n 300 -c 8 -modes gated` |"},
		{"failed", &results{Sections: []*section{{Title: "load gateway", Command: "go run ./bench/gateload", Err: errString("exit status 1")}}},
			"`go run ./bench/gateload`: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.res.writeGateway(&b)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestGateSpans(t *testing.T) {
	g, err := ParseGateload(openTestdata(t, "gatespans.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Spans) != 7 || g.Spans[3] != (GateSpan{Service: "executor", Name: "tools/call list_transactions", N: 501,
		P50: 1607 * time.Microsecond, P90: 2506 * time.Microsecond}) {
		t.Fatalf("spans %+v", g.Spans)
	}
	for _, bad := range []string{
		"span executor\n",
		"span executor commit: n=1\n",
		`span executor "commit": n=x` + "\n",
		`span executor "commit": p50` + "\n",
	} {
		if _, err := ParseGateload(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	res := &results{GateSpans: g, Sections: []*section{{Title: "load gateway spans", Command: "go run ./bench/gateload -spans"}},
		Benches: map[string]*BenchOutput{}}
	var b bytes.Buffer
	res.writeGateSpans(&b)
	for _, want := range []string{
		"In this run the gated call's p50 was 10.8 ms, 9.73 ms over direct.",
		"| executor | `commit start` | 501 | 1.15 ms | 1.55 ms |",
		"its outcome (`commit finish`, 894 µs) before it answers: **3.00 ms** at p50",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}
