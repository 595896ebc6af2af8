package verdictd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/convstate"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/policy"
)

// triggerRefusals lists the refusals (409) of an at_trigger preflight whose deferred record has
// no occurrence left, for the metric's series.
var triggerRefusals = [...]string{api.CodeDeferredConsumed, api.CodeRecurrenceExhausted, api.CodeRecurrenceTooSoon, api.CodeRecurrenceNotConfigured}

// trigger is what a trigger run knows of its deferred record beyond the expanded request.
type trigger struct {
	recordID string
}

// checkOccurrence reads the uses of tr's deferred record in rs and refuses the trigger when
// the intent has no occurrence left: a one-off intent (scheduled, conditional) after its
// verdict, a recurring one past its policy's recurrence. It returns the uses so far and how
// many verdicts the record is allowed (0: the count is not bounded).
//
// Conditional intents are one-off: the user stated a condition, not a repetition, and only the
// user creates values, so no policy setting turns one run into several; an intent meant to
// repeat is recurring and is stated so.
func (s *Service) checkOccurrence(ctx context.Context, rs convstate.Run, p *policy.Policy, req *api.Request, tr *trigger) (convstate.Uses, int, error) {
	u, err := rs.Uses(ctx, tr.recordID)
	if err != nil {
		return u, 0, fmt.Errorf("preflight: %w", err)
	}
	tool := p.Tool(req.Server, req.Tool)
	refuse := func(code, format string, args ...any) (convstate.Uses, int, error) {
		s.metrics.triggers.WithLabelValues(code).Inc()
		s.log.Warn("trigger refused", "code", code, "deferred_record_id", tr.recordID, "verdicts", u.Count)
		return u, 0, httpx.Errorf(http.StatusConflict, code, format, args...)
	}
	if triggerWhenCase(req, tool) != policy.Recurring {
		if u.Count > 0 {
			return refuse(api.CodeDeferredConsumed, "the deferred request %s runs once and was triggered to a verdict already (record %s)",
				tr.recordID, u.LastRecordID)
		}
		return u, 1, nil
	}
	if tool == nil || tool.Recurrence == nil {
		return refuse(api.CodeRecurrenceNotConfigured, "the policy sets no recurrence for %s/%s: a recurring request cannot run", req.Server, req.Tool)
	}
	rc := tool.Recurrence
	switch {
	case rc.Count > 0 && u.Count >= rc.Count:
		return refuse(api.CodeRecurrenceExhausted, "the deferred request %s has had its %d verdicts", tr.recordID, rc.Count)
	case rc.Interval > 0 && u.Count > 0:
		if next := time.UnixMilli(u.LastMillis).Add(rc.Interval); s.now().Before(next) {
			return refuse(api.CodeRecurrenceTooSoon, "the deferred request %s may run again from %s", tr.recordID,
				next.UTC().Format(time.RFC3339))
		}
	}
	return u, rc.Count, nil
}

// triggerWhenCase is the timing of a trigger's stored intent: the intent's when_case, or the
// one timing its tool allows. Anything unreadable is not recurring, so it runs at most once.
func triggerWhenCase(req *api.Request, t *policy.Tool) string {
	if req.Intent != nil && len(req.Intent.WhenCase) > 0 && string(req.Intent.WhenCase) != "null" {
		var wc string
		if json.Unmarshal(req.Intent.WhenCase, &wc) != nil {
			return ""
		}
		return wc
	}
	if t != nil && len(t.WhenCases) == 1 {
		return t.WhenCases[0]
	}
	return ""
}
