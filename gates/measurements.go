package gates

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/verdictgate/verdict/policy"
)

// mstatus is where one measurement got in this run.
type mstatus int

const (
	mUnmeasured mstatus = iota // no Measurer configured: only the system could answer
	mPending                   // pending_at_trigger at instruction time: measured at the trigger
	mWaiting                   // an input is not known: it waits, and is never asked
	mFailed                    // failed, or an input it needs failed: definition repair
	mDone
)

// mresult is one measurement's result in this run. Measurements are never carried between
// runs: every run starts with none.
type mresult struct {
	status mstatus
	value  any
	ref    api.MeasurementRef
	note   string
}

// wantedMeasurements lists the measurements this run needs: the measured source of every
// unknown slot that allows it, every measurement an expression reads, and, transitively, the
// measurements that produce their template inputs. Nothing else is fetched.
func (r *run) wantedMeasurements(slotNames []string, exprs []policy.Reads) map[string]bool {
	if r.ptool == nil || len(r.ptool.Measurements) == 0 {
		return nil // nothing can be measured
	}
	want := map[string]bool{}
	var queue []string
	add := func(n string) {
		if r.measurement(n) != nil && !want[n] {
			want[n] = true
			queue = append(queue, n)
		}
	}
	for _, n := range slotNames {
		if res := r.resolved[n]; res != nil && !res.known && r.measurement(n) != nil && r.field(n).Allows(api.SourceMeasuredData) {
			add(n)
		}
	}
	for _, rd := range exprs {
		for _, n := range rd.Measured {
			add(n)
		}
		for _, t := range rd.Tested {
			if n, ok := strings.CutPrefix(t, "measured."); ok {
				add(n)
			}
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, in := range r.measurement(n).Inputs {
			if _, ok := r.knownValue(in); ok {
				continue
			}
			if r.def.props[in] == nil || r.field(in).Allows(api.SourceMeasuredData) {
				add(in)
			}
		}
	}
	return want
}

// inputValue is a known value a measurement template may read: a settled argument, else a
// measurement taken earlier in this run.
func (r *run) inputValue(n string) (any, bool) {
	if v, ok := r.knownValue(n); ok {
		return v, true
	}
	if mr := r.mres[n]; mr != nil && mr.status == mDone {
		return mr.value, true
	}
	return nil, false
}

// measure runs the wanted measurements by dependency depth: every measurement whose inputs
// are known runs, concurrently with the others of its depth; their results may make the next
// depth runnable. A measurement whose inputs stay unknown waits (system_lookup); one whose
// input failed, or whose inputs only wait on each other, fails.
func (r *run) measure(want map[string]bool) {
	r.mres = make(map[string]*mresult, len(want))
	var todo []string
	for _, n := range slices.Sorted(maps.Keys(want)) {
		m := r.measurement(n)
		switch {
		case m.Err != nil:
			r.failMeasurement(n, m.Err.Error(), "measurement "+n+" cannot run as declared")
		case r.phase == api.PhaseAtInstruction && r.pending(n):
			r.mres[n] = &mresult{status: mPending, note: "measured at trigger time"}
		case r.measurer == nil:
			r.mres[n] = &mresult{status: mUnmeasured, note: "no measurer configured"}
		default:
			todo = append(todo, n)
		}
	}
	for len(todo) > 0 {
		var ready, later []string
		for _, n := range todo {
			var failed, pending, waiting, notYet []string
			for _, in := range r.measurement(n).Inputs {
				if _, ok := r.inputValue(in); ok {
					continue
				}
				mr := r.mres[in]
				switch {
				case mr == nil && want[in]:
					notYet = append(notYet, in)
				case mr != nil && mr.status == mFailed:
					failed = append(failed, in)
				case mr != nil && mr.status == mPending, mr == nil && r.phase == api.PhaseAtInstruction && r.pending(in):
					pending = append(pending, in)
				default:
					waiting = append(waiting, in)
				}
			}
			switch {
			case len(failed) > 0:
				r.failMeasurement(n, "input "+strings.Join(failed, ", ")+" failed", "needs "+strings.Join(failed, ", ")+", which failed")
			case len(notYet) > 0:
				later = append(later, n)
			case len(waiting) > 0:
				r.mres[n] = &mresult{status: mWaiting, note: "waits for " + strings.Join(waiting, ", ")}
			case len(pending) > 0:
				r.mres[n] = &mresult{status: mPending, note: "measured at trigger time"}
			default:
				ready = append(ready, n)
			}
		}
		if len(ready) == 0 {
			// What is left waits only on itself: a cycle no run can break.
			for _, n := range later {
				r.failMeasurement(n, "inputs form a cycle", "inputs form a cycle")
			}
			return
		}
		r.runDepth(ready)
		todo = later
	}
}

// runDepth performs measurements whose inputs are all known, concurrently.
func (r *run) runDepth(ready []string) {
	type result struct {
		v   any
		err error
		at  time.Time
	}
	results := make([]result, len(ready))
	one := func(i int) {
		m := r.measurement(ready[i])
		inputs := make(map[string]any, len(m.Inputs))
		for _, in := range m.Inputs {
			inputs[in], _ = r.inputValue(in)
		}
		v, err := r.measurer.Measure(r.ctx, m, inputs)
		results[i] = result{v: v, err: err, at: r.e.clock().UTC()}
	}
	if len(ready) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range ready {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	}
	for i, n := range ready {
		res := results[i]
		if res.err != nil {
			r.failMeasurement(n, res.err.Error(), "measurement "+n+" failed")
			continue
		}
		r.mres[n] = &mresult{status: mDone, value: res.v,
			ref: api.MeasurementRef{Name: n, Via: r.measurement(n).Via(), At: res.at.Format(stampLayout)}}
	}
}

func (r *run) failMeasurement(n, err, note string) {
	r.mres[n] = &mresult{status: mFailed, note: note}
	r.rec.MeasurementErrs = append(r.rec.MeasurementErrs, api.MeasureError{Name: n, Error: err})
}

// pending reports whether the policy lets name stay unknown until the trigger run.
func (r *run) pending(name string) bool {
	return r.ptool != nil && slices.Contains(r.ptool.PendingAtTrigger, name)
}

// measuredValues are this run's successful measurements, as expressions read them.
func (r *run) measuredValues() map[string]any {
	out := make(map[string]any, len(r.mres))
	for n, mr := range r.mres {
		if mr.status == mDone {
			out[n] = mr.value
		}
	}
	return out
}
