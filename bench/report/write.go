package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

const notMeasured = "not measured"

// get returns one benchmark of one package's run, or nil.
func (r *results) get(pkg, name string) *Bench { return r.Benches[pkg].Get(name) }

// med is the median of unit for one benchmark.
func (r *results) med(pkg, name, unit string) (float64, bool) { return r.get(pkg, name).Median(unit) }

// medRatio is the median over runs of a/b, both units of the same benchmark line: for
// interleaved measurements, where each run's two figures saw the same load.
func medRatio(b *Bench, a, over string) (float64, bool) {
	if b == nil {
		return 0, false
	}
	var rs []float64
	for _, run := range b.Runs {
		x, ok1 := run[a]
		y, ok2 := run[over]
		if ok1 && ok2 && y > 0 {
			rs = append(rs, x/y)
		}
	}
	return median(rs)
}

// formatNs writes a duration given in nanoseconds with three significant digits.
func formatNs(ns float64) string {
	switch {
	case ns < 1e3:
		return sig3(ns) + " ns"
	case ns < 1e6:
		return sig3(ns/1e3) + " µs"
	case ns < 1e9:
		return sig3(ns/1e6) + " ms"
	}
	return sig3(ns/1e9) + " s"
}

func formatDur(d time.Duration) string { return formatNs(float64(d)) }

// formatUs is formatNs of a figure in microseconds.
func formatUs(us float64) string { return formatNs(us * 1e3) }

// sig3 formats v with three significant digits (more for values of 1000 and up).
func sig3(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// formatCount writes an integer-valued figure with thousands separators.
func formatCount(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func formatRatio(v float64) string { return sig3(v) + "×" }

func met(ok bool) string {
	if ok {
		return "**yes**"
	}
	return "**no**"
}

// row is one line of the main table.
type row struct{ op, project, floor, ratio, target, met string }

// mainRows are the lines of the main table, an empty cell written as a dash.
func (r *results) mainRows() []row {
	rows := []row{r.verifyRow(), r.signRow()}
	rows = append(rows, r.digestRows()...)
	rows = append(rows, r.callCheckRow(), r.preflightRow(), r.replayRow(), r.policyTestRow())
	rows = append(rows, r.throughputRows()...)
	for i := range rows {
		x := &rows[i]
		for _, p := range []*string{&x.project, &x.floor, &x.ratio, &x.target, &x.met} {
			if *p == "" {
				*p = "—"
			}
		}
	}
	return rows
}

// fig is one measured figure, or none.
type fig struct {
	v  float64
	ok bool
}

func figOf(v float64, ok bool) fig { return fig{v, ok} }

// cell is prefix and f formatted, or not measured.
func (f fig) cell(prefix string, format func(float64) string) string {
	if !f.ok {
		return notMeasured
	}
	return prefix + format(f.v)
}

// over is f divided by g, measured when both are.
func (f fig) over(g fig) fig { return fig{f.v / g.v, f.ok && g.ok} }

// met says whether f met its target, or is empty when f was not measured.
func (f fig) met(ok bool) string {
	if !f.ok {
		return ""
	}
	return met(ok)
}

func interleaved(v float64) string { return formatRatio(v) + " (interleaved)" }

// nsAllocs is a benchmark's time (unit ns) and, when measured, its allocations (unit allocs),
// or not measured.
func nsAllocs(b *Bench, ns, allocs string) string {
	v, ok := b.Median(ns)
	if !ok {
		return notMeasured
	}
	if a, ok := b.Median(allocs); ok {
		return fmt.Sprintf("%s, %s allocs", formatNs(v), formatCount(a))
	}
	return formatNs(v)
}

// verifyRow is verification: the ratio is the interleaved one, steadier than two separate
// benchmarks.
func (r *results) verifyRow() row {
	x := figOf(r.med("verdict", "BenchmarkVerifyEdDSAOverRaw", "x-raw"))
	return row{op: "verify a verdict, EdDSA (`verdict.Verify`: parse, header rules, key lookup, signature, every claim)",
		project: nsAllocs(r.get("verdict", "BenchmarkVerifyEdDSA"), "ns/op", "allocs/op"),
		floor:   figOf(r.med("verdict", "BenchmarkRawEd25519Verify", "ns/op")).cell("raw `ed25519.Verify` of the same token: ", formatNs),
		ratio:   x.cell("", interleaved), target: "≤ 1.3× raw verify", met: x.met(x.v <= 1.3)}
}

func (r *results) signRow() row {
	raw := figOf(r.med("verdict", "BenchmarkRawEd25519Sign", "ns/op"))
	x := row{op: "sign a verdict, EdDSA (claims → compact JWS)",
		project: nsAllocs(r.get("verdict", "BenchmarkSignEdDSA"), "ns/op", "allocs/op"), floor: raw.cell("raw `ed25519.Sign`: ", formatNs)}
	if q := figOf(r.med("verdict", "BenchmarkSignEdDSA", "ns/op")).over(raw); q.ok {
		x.ratio = formatRatio(q.v) // unlike the other rows, a dash when not measured
	}
	return x
}

// digestRows are the canonical digests of 1 KiB arguments, decoded (verdictd's) and as text
// (the executor's).
func (r *results) digestRows() []row {
	d := r.get("canonical", "BenchmarkDigestScale/size=1KiB")
	digest := figOf(d.Median("digest-ns"))
	return []row{{op: "canonical digest of a decoded 1 KiB argument object (`canonical.Digest`, as verdictd digests its call)",
		project: nsAllocs(d, "digest-ns", "digest-allocs"),
		floor:   figOf(d.Median("naive-ns")).cell("naive canonical encode (`encoding/json` decode + encode, sorted keys): ", formatNs),
		ratio:   figOf(medRatio(d, "digest-ns", "naive-ns")).cell("", interleaved), target: "< 10 µs", met: digest.met(digest.v < 10e3),
	}, {op: "canonical digest of 1 KiB argument text (`canonical.DigestJSON`: validate, canonicalize, hash, as the executor digests what it was sent)",
		project: medCell(d, "json-ns", formatNs),
		floor:   figOf(d.Median("sha256-ns")).cell("SHA-256 of the same bytes: ", formatNs),
		ratio:   figOf(medRatio(d, "json-ns", "sha256-ns")).cell("", interleaved),
	}}
}

func (r *results) callCheckRow() row {
	vd := r.get("verdict", "BenchmarkVerifyDigestScale/size=1KiB")
	return row{op: "the executor's check of one call, 1 KiB arguments (`DigestJSON` + `verdict.Verify` binding that digest)",
		project: medCell(vd, "op-ns", formatNs),
		floor:   figOf(vd.Median("floor-ns")).cell("SHA-256 + raw `ed25519.Verify`: ", formatNs),
		ratio:   medCell(vd, "x-floor", interleaved)}
}

func (r *results) preflightRow() row {
	pf := figOf(r.med("gates", "BenchmarkPreflight", "ns/op"))
	sv := figOf(r.med("gates", "BenchmarkFloorSchemaValidate/order_book", "ns/op"))
	return row{op: "one preflight, 6-field tool with one `oneOf`, ending `verdict_issued` (`gates.Engine.Run`, in-process, no I/O, no signing)",
		project: nsAllocs(r.get("gates", "BenchmarkPreflight"), "ns/op", "allocs/op"),
		floor:   sv.cell("JSON Schema validation of the same call (compiled once): ", formatNs),
		ratio:   pf.over(sv).cell("", formatRatio), target: "< 50 µs", met: pf.met(pf.v < 50e3)}
}

// replayRow is verdictd policy replay, which decides stored records again, one after another:
// what it adds to the engine's run is reading the stored record and its capture, and decoding
// the captured request.
func (r *results) replayRow() row {
	pf := figOf(r.med("gates", "BenchmarkPreflight", "ns/op"))
	rp := figOf(r.med("replay", "BenchmarkReplay", "ns/op")) // for 1,000 records
	rate := figOf(r.med("replay", "BenchmarkReplay", "records/s"))
	x := row{op: "replay one captured preflight (`verdictd policy replay`: the stored record and its capture read, the request decoded and decided again in process; `BenchmarkReplay`, 1,000 records of the example policy's transfer)",
		project: notMeasured, floor: pf.cell("one in-process preflight (`BenchmarkPreflight`, the row above): ", formatNs),
		ratio: fig{rp.v / 1000, rp.ok}.over(pf).cell("", formatRatio), target: "≥ 5,000 records/s"}
	if rp.ok && rate.ok {
		x.project, x.met = formatNs(rp.v/1000)+", "+strconv.FormatFloat(math.Round(rate.v), 'f', 0, 64)+" records/s", met(rate.v >= 5000)
	}
	return x
}

// policyTestRow is verdictd policy test: a thousand cases of the example policy's tests, run
// in process through the engine, against as many in-process preflights.
func (r *results) policyTestRow() row {
	pf := figOf(r.med("gates", "BenchmarkPreflight", "ns/op"))
	pf1000 := fig{1000 * pf.v, pf.ok}
	run := figOf(r.med("policytest", "BenchmarkRun1000Cases", "ns/op"))
	return row{op: "run 1,000 test cases (`verdictd policy test`: the example policy's tests over and over, every step a preflight in process; `BenchmarkRun1000Cases`)",
		project: run.cell("", formatNs), floor: pf1000.cell("1,000 in-process preflights (`BenchmarkPreflight`): ", formatNs),
		ratio: run.over(pf1000).cell("", formatRatio), target: "< 2 s", met: run.met(run.v < 2e9)}
}

// throughputRows are the durable writes and the daemons end to end. Durable writes sit on one
// bbolt commit with fsync: a per-request commit caps throughput at that commit's rate, which
// the group commit must beat.
func (r *results) throughputRows() []row {
	var rows []row
	capRate, capOK := r.med("store", "BenchmarkFloorBoltUpdate", "ops/s")
	capP50, _ := r.med("store", "BenchmarkFloorBoltUpdate", "p50-µs")
	capCell := notMeasured
	if capOK {
		capCell = fmt.Sprintf("one bbolt `Update` + fsync per write: %s/s (p50 %s)", formatCount(capRate), formatUs(capP50))
	}
	rateRatio := func(v float64) string {
		if !capOK || capRate == 0 {
			return notMeasured
		}
		return formatRatio(v/capRate) + " the rate"
	}
	for _, w := range []struct{ op, pkg, name string }{
		{"decision record append (~1.5 KiB), 32 writers, group commit (verdictd's write)", "store", "BenchmarkDecisionAppendParallel"},
		{"nonce consume + `started` record in one commit, 32 writers (the executor's write before a call)", "nonce", "BenchmarkNonceConsumeParallel/consume+start"},
	} {
		x := row{op: w.op, project: notMeasured, floor: capCell, ratio: notMeasured}
		if v, ok := r.med(w.pkg, w.name, "ops/s"); ok {
			p50, _ := r.med(w.pkg, w.name, "p50-µs")
			p99, _ := r.med(w.pkg, w.name, "p99-µs")
			x.project = fmt.Sprintf("%s/s (p50 %s, p99 %s)", formatCount(v), formatUs(p50), formatUs(p99))
			x.ratio = rateRatio(v)
		}
		rows = append(rows, x)
	}
	for _, l := range []struct{ op, key, target string }{
		{"verdictd end to end: preflights ending `verdict_issued`, signed, decision record durable (`bench/preflightload`, 32 clients)", "preflight", "≥ 5,000/s, p99 < 5 ms"},
		{"executor end to end: verify, nonce, durable records, call a local MCP echo tool, receipt (`bench/execload`, 32 clients)", "echo-bbolt", "≥ 5,000/s"},
	} {
		x := row{op: l.op, project: notMeasured, floor: capCell, ratio: notMeasured, target: l.target}
		if lr := r.Loads[l.key]; lr != nil {
			x.project = fmt.Sprintf("%s/s (p50 %s, p99 %s)", formatCount(lr.Throughput), formatDur(lr.P50), formatDur(lr.P99))
			x.ratio = rateRatio(lr.Throughput)
			ok := lr.Throughput >= 5000 && lr.Bad == 0
			if l.key == "preflight" {
				ok = ok && lr.P99 < 5*time.Millisecond
			}
			x.met = met(ok)
		}
		rows = append(rows, x)
	}
	return rows
}

// A printf writes the next part of the report.
type printf func(format string, args ...any)

func writeReport(w io.Writer, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	cmd := "go run ./bench/report"
	if r.Cfg.Args != "" {
		cmd += " " + r.Cfg.Args
	}
	p("# Benchmarks\n\n")
	p("Every figure in this file was measured in one run of one command, from the module root:\n\n")
	p("    %s\n\n", cmd)
	p("Measured %s on %s; the whole run took %s. It runs the Go\n",
		r.Start.UTC().Format("2006-01-02 15:04 MST"), r.Machine.describe(), r.Took.Round(time.Second))
	p("benchmarks below with `-count %d -benchtime %s` and reports the median over the runs, then the\n", r.Cfg.Count, r.Cfg.Bench)
	p("closed-loop load tools against real processes, %s requests from %d clients each.\n",
		formatCount(float64(r.Cfg.N)), r.Cfg.Clients)
	p("`go run ./bench/report -quick` is a smoke run of the same steps.\n\n")
	if r.Cfg.Quick {
		p("**This is a smoke run (`-quick`): its figures are too short to compare with anything.**\n\n")
	}
	if avg, peak, ok := r.othersCPU(); ok {
		p("Other processes on the machine kept **%.1f of its %d cores** busy on average during the run (%.1f in the\n", avg, r.Machine.CPUs, peak)
		p("busiest step); per step under [Conditions](#conditions).\n\n")
	}
	p("The machine is noisy (±20 %%, more while other work runs): compare ratios measured in one run, never\n")
	p("absolute times across runs. Ratios marked *interleaved* time the operation and its floor in the same\n")
	p("loop iteration, so both see the same load. The load average around every step is listed under\n")
	p("[Conditions](#conditions).\n\n")

	p("## Against the floors\n\n")
	p("| operation | this project | the floor it sits on | ratio | target | met? |\n")
	p("| --- | ---: | ---: | ---: | --- | --- |\n")
	for _, x := range r.mainRows() {
		p("| %s | %s | %s | %s | %s | %s |\n", x.op, x.project, x.floor, x.ratio, x.target, x.met)
	}
	p("\n")
	r.writeNotes(p)
	r.writeFloors(p)
	r.writeSizeScaling(p)
	r.writeSlotScaling(p)
	r.writeBounds(p)
	r.writeLoads(p)
	r.writeGateway(w)
	r.writeConditions(p, cmd)
}

func (m machine) describe() string {
	s := fmt.Sprintf("%d cores", m.CPUs)
	if m.CPU != "" {
		s += " " + m.CPU
	}
	return s + ", " + m.GoVersion + ", " + m.Kernel + ", commit " + m.Commit
}

func (r *results) writeNotes(p printf) {
	p("Notes:\n\n")
	if v, ok := r.med("verdict", "BenchmarkGoJoseVerifyOverRaw", "x-raw"); ok {
		p("- `verdict.Verify` reads a token once, in its own strict parse, and checks the signature over the\n")
		p("  parts it decoded with `crypto/ed25519` or `crypto/ecdsa`, as go-jose (which signs) verifies; a property\n")
		p("  and a fuzz target (`verdict/signature_test.go`) hold the two to the same answer. go-jose's compact parse + verify,\n")
		p("  measured the same way (`BenchmarkGoJoseVerifyOverRaw`), is **%s** raw `ed25519.Verify` in this run:\n", formatRatio(v))
		p("  what verifying through the library again, after the strict parse, would cost.\n")
	}
	if v, ok := r.med("canonical", "BenchmarkReferenceJCSDigest1KiB", "ns/op"); ok {
		a, _ := r.med("canonical", "BenchmarkReferenceJCSDigest1KiB", "allocs/op")
		p("- `canonical` has its own one-pass RFC 8785 encoder: the library path, `gowebpki/jcs` Transform +\n")
		p("  SHA-256 of a 1 KiB object, costs %s and %s allocations here (`BenchmarkReferenceJCSDigest1KiB`), and\n", formatNs(v), formatCount(a))
		p("  rounds inexact numbers silently. The encoder is proven byte-identical to `jcs` by a property test and\n")
		p("  by the fuzz target.\n")
	}
	p("- The preflight figure excludes request decoding, signing and the record commit (the end-to-end\n")
	p("  verdictd row has them). Its time goes to the JSON Schema validation of the assembled call, the\n")
	p("  canonical digest of the arguments, `math/big` for number grounding, and allocation.\n")
	p("- The durable rows are throughput at 32 concurrent writers against a per-request commit, whose rate is\n")
	p("  the cap of a daemon that commits each request on its own; the group commit shares one fsync among\n")
	p("  everything queued.\n\n")
}

// writeFloors lists every floor of this run beside its figure on an idle machine of this kind,
// which shows at a glance how loaded the run was.
func (r *results) writeFloors(p printf) {
	p("### Floors in this run\n\n")
	p("The reference column is the same floor measured on an idle 2-core machine of this kind; a run whose\n")
	p("floors are well above it was measured under load.\n\n")
	p("| floor | this run | idle reference |\n| --- | ---: | ---: |\n")
	d := r.get("canonical", "BenchmarkDigestScale/size=1KiB")
	p("| raw `crypto/ed25519` Verify | %s | 45 µs |\n", medCell(r.get("verdict", "BenchmarkRawEd25519Verify"), "ns/op", formatNs))
	p("| raw `crypto/ed25519` Sign | %s | 21 µs |\n", medCell(r.get("verdict", "BenchmarkRawEd25519Sign"), "ns/op", formatNs))
	p("| SHA-256 of 1 KiB | %s | 0.7 µs |\n", medCell(d, "sha256-ns", formatNs))
	p("| naive canonical encode of 1 KiB (`encoding/json` decode + encode) | %s | 26 µs |\n", medCell(d, "naive-ns", formatNs))
	p("| JSON Schema validation, small object (jsonschema v6, compiled once) | %s | 3.5–4 µs |\n", medCell(r.get("gates", "BenchmarkFloorSchemaValidate/order_book"), "ns/op", formatNs))
	p("| one bbolt `Update` with fsync, p50 | %s | 0.7 ms |\n", medCell(r.get("store", "BenchmarkFloorBoltUpdate"), "p50-µs", formatUs))
	p("| one bbolt `Update` with fsync, CPU time (user + system) | %s | — |\n", medCell(r.get("store", "BenchmarkFloorBoltUpdate"), "cpu-µs/op", formatUs))
	p("| write 4 KiB + fsync, p50 | %s | 0.15 ms |\n", medCell(r.get("store", "BenchmarkFloorFsync"), "p50-µs", formatUs))
	p("| write 4 KiB + fsync, CPU time (user + system) | %s | — |\n\n", medCell(r.get("store", "BenchmarkFloorFsync"), "cpu-µs/op", formatUs))
}

func (r *results) writeSizeScaling(p printf) {
	p("## How cost grows with argument size\n\n")
	p("Argument objects of transfer fields and invoice line items (non-ASCII text, integers, decimals,\n")
	p("members out of order), filled to each size. `BenchmarkDigestScale` in canonical/ times all four\n")
	p("columns in one loop iteration; the per-KiB column is `DigestJSON`'s.\n\n")
	p("| size | `Digest` (decoded value) | `DigestJSON` (text) | SHA-256 (floor) | ÷ SHA-256 | naive `encoding/json` | ÷ naive | `DigestJSON` per KiB |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	sizes := []struct {
		name string
		kib  float64
	}{{"1KiB", 1}, {"16KiB", 16}, {"256KiB", 256}, {"1MiB", 1024}}
	size := strings.NewReplacer("KiB", " KiB", "MiB", " MiB") // "1KiB" is written "1 KiB"
	for _, s := range sizes {
		b := r.get("canonical", "BenchmarkDigestScale/size="+s.name)
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", size.Replace(s.name), medCell(b, "digest-ns", formatNs),
			medCell(b, "json-ns", formatNs), medCell(b, "sha256-ns", formatNs), ratioCell(b, "json-ns", "sha256-ns"),
			medCell(b, "naive-ns", formatNs), ratioCell(b, "json-ns", "naive-ns"),
			medCell(b, "json-ns", func(v float64) string { return formatNs(v / s.kib) }))
	}
	p("\nThe executor's check of one call as the arguments grow (`BenchmarkVerifyDigestScale` in verdict/:\n")
	p("`DigestJSON` of the text sent, then `verdict.Verify` of a verdict binding that digest), interleaved\n")
	p("with its floor, SHA-256 of the same text and a raw `ed25519.Verify` of the same token:\n\n")
	p("| size | digest + verify | floor (SHA-256 + raw verify) | ratio |\n| --- | ---: | ---: | ---: |\n")
	for _, s := range sizes {
		b := r.get("verdict", "BenchmarkVerifyDigestScale/size="+s.name)
		p("| %s | %s | %s | %s |\n", size.Replace(s.name), medCell(b, "op-ns", formatNs), medCell(b, "floor-ns", formatNs), medCell(b, "x-floor", formatRatio))
	}
	p("\n")
}

func (r *results) writeSlotScaling(p printf) {
	p("## How cost grows with slot count\n\n")
	p("One in-process preflight (`BenchmarkPreflightSlots` in gates/) of a tool with N required string\n")
	p("arguments, every one grounded by a candidate in the user's instruction, ending `verdict_issued`;\n")
	p("beside it, the JSON Schema validation of the same N-argument call (`BenchmarkFloorSchemaValidate`),\n")
	p("and the first preflight after the tool's definition changed, which compiles it\n")
	p("(`BenchmarkPreflightSlotsCold`: a new engine per run).\n\n")
	p("| slots | preflight | per slot | memory | allocs | schema validation (floor) | ratio | first preflight (definition compiled) |\n")
	p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, n := range []int{1, 10, 50, 200} {
		b := r.get("gates", fmt.Sprintf("BenchmarkPreflightSlots/slots=%d", n))
		f := r.get("gates", fmt.Sprintf("BenchmarkFloorSchemaValidate/slots=%d", n))
		ratio := notMeasured
		if x, ok1 := b.Median("ns/op"); ok1 {
			if y, ok2 := f.Median("ns/op"); ok2 && y > 0 {
				ratio = formatRatio(x / y)
			}
		}
		cold := r.get("gates", fmt.Sprintf("BenchmarkPreflightSlotsCold/slots=%d", n))
		p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", n, medCell(b, "ns/op", formatNs), medCell(b, "ns/slot", formatNs),
			medCell(b, "B/op", formatBytes), medCell(b, "allocs/op", formatCount), medCell(f, "ns/op", formatNs), ratio,
			medCell(cold, "ns/op", formatNs))
	}
	p("\n")
	warm10, ok1 := r.med("gates", "BenchmarkPreflightSlots/slots=10", "ns/op")
	warm200, ok2 := r.med("gates", "BenchmarkPreflightSlots/slots=200", "ns/op")
	cold10, ok3 := r.med("gates", "BenchmarkPreflightSlotsCold/slots=10", "ns/op")
	cold200, ok4 := r.med("gates", "BenchmarkPreflightSlotsCold/slots=200", "ns/op")
	if ok1 && ok2 && ok3 && ok4 && warm10 > 0 && cold10 > 0 {
		p("From 10 to 200 slots (20× the slots) the preflight grows %s and the first preflight of a changed\n", formatRatio(warm200/warm10))
		p("definition %s.\n\n", formatRatio(cold200/cold10))
	}
}

// writeBounds reports what the grounding rule costs one check, and the CPU of the costliest
// preflight the evaluation limits still answer.
func (r *results) writeBounds(p printf) {
	p("## Grounding checks and the costliest preflight\n\n")
	p("One grounding check of a span at the end of a 1 KB segment on a fresh index (`BenchmarkGroundToken`):\n")
	p("ASCII text decides word boundaries in place; other text has them computed once per segment by\n")
	p("UAX #29 (uniseg). Beside it, the CPU of the most expensive preflight the default limits still\n")
	p("answer (`BenchmarkPreflightMostExpensive`): 64 checklist items of nested literals to compile, one\n")
	p("comprehension just under the evaluation budget, and both.\n\n")
	p("| benchmark | time | throughput |\n| --- | ---: | ---: |\n")
	for _, n := range []string{"ascii", "unicode"} {
		b := r.get("gates", "BenchmarkGroundToken/"+n)
		p("| grounding check, %s segment | %s | %s |\n", n, medCell(b, "ns/op", formatNs), medCell(b, "MB/s", func(v float64) string { return sig3(v) + " MB/s" }))
	}
	for _, n := range []string{"compile", "evaluate", "all"} {
		b := r.get("gates", "BenchmarkPreflightMostExpensive/"+n)
		p("| costliest preflight: %s | %s CPU | — |\n", n, medCell(b, "cpu-ms/op", func(v float64) string { return sig3(v) + " ms" }))
	}
	p("\n")
}

func (r *results) writeLoads(p printf) {
	p("## Load: real processes over loopback\n\n")
	p("Closed loop: every client sends its next request when the previous answer arrives. The executor\n")
	p("runs are `bench/execload` (pre-signed verdicts; the executor verifies, consumes the nonce, writes the\n")
	p("`started` and outcome records, calls the tool over stdio and signs a receipt): `echo` is\n")
	p("`bench/echoserver`, the cost of the executor alone; `get_balance` is the example bank server; the\n")
	p("etcd run keeps nonces in a private single-member etcd. The verdictd run is `bench/preflightload`\n")
	p("(decode, gates, payload validation, signing, a durable decision record), at 32 clients and at 8,\n")
	p("where its p99 target of 5 ms holds.\n\n")
	p("| run | requests | throughput | p50 | p90 | p99 | max | non-200 | others' CPU (cores) |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, lr := range loadRuns {
		s := r.section("load " + lr.key)
		if s == nil {
			continue
		}
		l := r.Loads[lr.key]
		if l == nil {
			p("| %s | %s | | | | | | | |\n", code(s.Command), s.why())
			continue
		}
		p("| %s | %s | %s/s | %s | %s | %s | %s | %d | %s |\n", code(s.Command), formatCount(float64(l.N)),
			formatCount(l.Throughput), formatDur(l.P50), formatDur(l.P90), formatDur(l.P99), formatDur(l.Max), l.Bad, othersCell(s))
	}
	p("\n")
}

// writeConditions lists the steps and what they ran under; cmd is the report's command line.
func (r *results) writeConditions(p printf, cmd string) {
	p("## Conditions\n\n")
	p("- Date: %s (UTC); whole run %s.\n", r.Start.UTC().Format("2006-01-02 15:04:05"), r.Took.Round(time.Second))
	p("- Machine: %d cores (`nproc`)", r.Machine.CPUs)
	if r.Machine.CPU != "" {
		p(", %s", r.Machine.CPU)
	}
	p("; %s; %s.\n", r.Machine.GoVersion, r.Machine.Kernel)
	p("- Source: commit %s.\n", r.Machine.Commit)
	p("- Command: `%s`. Each step below can be run on its own.\n\n", cmd)
	p("Load averages include the step's own processes (a load run keeps every core busy by itself). The\n")
	p("others' CPU column is the machine's busy CPU time during the step (`/proc/stat`) less the step's\n")
	p("own (its process tree's rusage), over the step's wall time: what other work took from it.\n\n")
	p("| step | command | load avg before (1, 5, 15 min) | after | others' CPU (cores) | took | result |\n")
	p("| --- | --- | --- | --- | ---: | ---: | --- |\n")
	for _, s := range r.Sections {
		result := "ok"
		if s.Err != nil {
			result = oneLine(s.Err.Error())
		}
		took := "—"
		if s.Took > 0 {
			took = s.Took.Round(100 * time.Millisecond).String()
		}
		before, after := string(s.Before), string(s.After)
		if before == "" {
			before, after = "—", "—"
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", s.Title, code(s.Command), before, after, othersCell(s), took, result)
	}
}

// othersCPU is the CPU other processes used during the measured steps, in cores: averaged
// over the steps' wall time, and the largest of one step.
func (r *results) othersCPU() (avg, peak float64, ok bool) {
	var sum, wall float64
	for _, s := range r.Sections {
		if s.Others < 0 || s.Took <= 0 {
			continue
		}
		sum += s.Others * s.Took.Seconds()
		wall += s.Took.Seconds()
		peak = max(peak, s.Others)
	}
	if wall == 0 {
		return 0, 0, false
	}
	return sum / wall, peak, true
}

func othersCell(s *section) string {
	if s.Took <= 0 || s.Others < 0 {
		return "—"
	}
	return strconv.FormatFloat(s.Others, 'f', 1, 64)
}

func medCell(b *Bench, unit string, format func(float64) string) string {
	return figOf(b.Median(unit)).cell("", format)
}

func ratioCell(b *Bench, a, over string) string {
	return figOf(medRatio(b, a, over)).cell("", formatRatio)
}

func formatBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return sig3(v/(1<<20)) + " MiB"
	case v >= 1<<10:
		return sig3(v/(1<<10)) + " KiB"
	}
	return formatCount(v) + " B"
}

// code writes s as a code span in a table cell, where a pipe must be escaped even inside it.
func code(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }

// oneLine keeps an error message to one short table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// section returns the last section titled title, or nil.
func (r *results) section(title string) *section {
	var s *section
	for _, x := range r.Sections {
		if x.Title == title {
			s = x
		}
	}
	return s
}

// why says why s measured nothing: its error, or that it did not run.
func (s *section) why() string {
	if s.Err != nil {
		return oneLine(s.Err.Error())
	}
	return notMeasured
}
