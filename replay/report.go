package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Formats of a report.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Formats are the formats Write takes.
var Formats = []string{FormatText, FormatJSON}

// Write writes the report in format.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatText:
		return r.WriteText(w)
	}
	return fmt.Errorf("replay: unknown format %q", format)
}

// WriteText writes the changed calls, now allowed first, then the summary per tool and the
// counts.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	heading := map[string]string{ChangeAllowed: "NOW ALLOWED", ChangeRefused: "NOW REFUSED", ChangeOther: "CHANGED"}
	last := ""
	for _, c := range r.Calls {
		if c.Change != last {
			fmt.Fprintf(bw, "%s:\n", heading[c.Change])
			last = c.Change
		}
		fmt.Fprintf(bw, "  %s  %s  %s/%s  %s: %s -> %s (gate %s)\n", c.RecordID, c.Timestamp, c.Server, c.Tool, c.Principal, c.Before, c.After, c.Gate)
		if len(c.Asked) > 0 {
			fmt.Fprintf(bw, "      would ask: %s\n", strings.Join(c.Asked, ", "))
		}
		if len(c.NotCaptured) > 0 {
			fmt.Fprintf(bw, "      not captured (failed in replay): %s\n", strings.Join(c.NotCaptured, ", "))
		}
	}
	if len(r.Calls) > 0 {
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "%-32s %8s %8s %8s %8s %8s %8s\n", "TOOL", "RECORDS", "REPLAYED", "NOT", "CHANGED", "ALLOWED", "REFUSED")
	for _, t := range r.Tools {
		fmt.Fprintf(bw, "%-32s %8d %8d %8d %8d %8d %8d\n", t.Server+"/"+t.Tool, t.Records, t.Replayed, t.NotReplayable, t.Changed, t.NowAllowed, t.NowRefused)
	}
	fmt.Fprintf(bw, "\npolicy %s: %d records, %d replayed, %d not replayable, %d changed\n",
		r.PolicyVersion, r.Records, r.Replayed, r.NotReplayable, r.Changed)
	if r.NotReplayable > 0 {
		reasons := map[string]int{}
		for _, s := range r.Skipped {
			reasons[s.Reason]++
		}
		fmt.Fprintf(bw, "not replayable: %d %s (kept without a capture: records.capture_requests was off)", reasons[NotCaptured], NotCaptured)
		if n := r.NotReplayable - reasons[NotCaptured]; n > 0 {
			fmt.Fprintf(bw, ", %d other (see --format json)", n)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}
