package audit

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report for a terminal: the counts as tables, then every record to
// reconcile and every anomaly, one per line, and a last line saying whether the audit is clean.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)

	fmt.Fprintln(tw, "SOURCES\trecords\tread\tduplicates")
	var unverified []string
	for _, s := range r.Sources {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", s.Source, s.Records, s.Read, s.Duplicates)
		if s.Completeness == Unverified && !slices.Contains(unverified, s.Source) {
			unverified = append(unverified, s.Source)
		}
	}
	// Lines without a tab are no part of the table's columns.
	switch len(unverified) {
	case 0:
	case 1:
		fmt.Fprintf(tw, "  note: %s cannot prove it is whole (a JSONL file cut at a line boundary\n"+
			"        reads as a shorter export); its completeness is the operator's responsibility\n", unverified[0])
	default:
		fmt.Fprintf(tw, "  note: %s cannot prove they are whole (a JSONL file cut at a line boundary\n"+
			"        reads as a shorter export); their completeness is the operator's responsibility\n", strings.Join(unverified, ", "))
	}
	fmt.Fprintln(tw)

	fmt.Fprintf(tw, "DECISION RECORDS\t%d\n", r.Decisions.Total)
	writeCounts(tw, r.Decisions.ByOutcome)
	fmt.Fprintln(tw)

	fmt.Fprintf(tw, "EXECUTION RECORDS\t%d\n", r.Executions.Total)
	writeCounts(tw, r.Executions.ByDecision)
	fmt.Fprintln(tw)

	if len(r.Executions.RefusalsByReason) > 0 {
		fmt.Fprintln(tw, "REFUSALS BY REASON")
		writeCounts(tw, r.Executions.RefusalsByReason)
		fmt.Fprintln(tw)
	}

	fmt.Fprintln(tw, "PAIRS")
	fmt.Fprintf(tw, "  issued and executed\t%d\n", r.Pairs.Paired)
	fmt.Fprintf(tw, "  issued, never executed\t%d\n", r.Pairs.IssuedNotExecuted)
	fmt.Fprintf(tw, "  consumed, never started\t%d\n", r.Pairs.ConsumedNotStarted)
	fmt.Fprintf(tw, "  executed, never issued\t%d\n", r.Pairs.Unpaired)
	if err := tw.Flush(); err != nil {
		return err
	}

	writeOpen(bw, "OUTCOME UNKNOWN (%d): reconcile each with the upstream system", r.OutcomeUnknown)
	writeOpen(bw, "CONSUMED, NEVER STARTED (%d): nothing ran; each needs a fresh preflight", r.ConsumedNotStarted)
	writeOpen(bw, "IN FLIGHT (%d): started within the grace period", r.InFlight)
	if len(r.Anomalies) > 0 {
		fmt.Fprintf(bw, "\nANOMALIES (%d)\n", len(r.Anomalies))
		for _, a := range r.Anomalies {
			fmt.Fprintf(bw, "  %s: %s\n", a.Kind, a.Message)
		}
	}
	if r.Clean {
		fmt.Fprintln(bw, "\nclean: no anomaly")
	} else {
		fmt.Fprintf(bw, "\nNOT CLEAN: %d anomalies\n", len(r.Anomalies))
	}
	return bw.Flush()
}

func writeCounts(w io.Writer, m map[string]int) {
	// Largest first, so the common cases lead; ties by name for a stable output.
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
	for _, k := range keys {
		fmt.Fprintf(w, "  %s\t%d\n", k, m[k])
	}
}

// writeOpen writes the section of xs, headed by head with their number, unless xs is empty.
func writeOpen(w io.Writer, head string, xs []OpenExecution) {
	if len(xs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n"+head+"\n", len(xs))
	for _, x := range xs {
		reason := ""
		if x.Reason != "" {
			reason = ", reason " + x.Reason
		}
		fmt.Fprintf(w, "  %s: verdict %s on executor %s, started %s%s\n",
			x.RecordID, orNone(x.VerdictID), orNone(x.ExecutorID), x.StartedAt.UTC().Format(time.RFC3339), reason)
	}
}
