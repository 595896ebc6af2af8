package approvals

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// FuzzWebhookDecision: a webhook's answer is read one way only. Whatever an accepted answer
// is, a lenient reader (encoding/json: case-folded names, the last duplicate winning) reads
// the same decision, digest and reason from it, and the decision is approve or deny: no
// answer says one thing to verdictd and another to a reader of the webhook's logs.
func FuzzWebhookDecision(f *testing.F) {
	for _, s := range []string{
		`{"decision": "approve", "arguments_digest": "sha256:ab", "reason": "ok"}`,
		`{"decision": "deny", "arguments_digest": "sha256:ab"}`,
		`{"decision": "deny", "decision": "approve", "arguments_digest": "sha256:ab"}`,
		`{"decision": "deny", "Decision": "approve", "arguments_digest": "sha256:ab"}`,
		`{"decision": "approve", "arguments_digest": "sha256:ab", "approved": true}`,
		`{"decision": "approve", "arguments_digest": ["sha256:ab"]}`,
		`{"decision": "appro\u0076e", "arguments_digest": "sha256:ab"}`,
		`[{"decision": "approve"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := readWebhookDecision(raw)
		if err != nil {
			if !errors.Is(err, errWebhook) {
				t.Fatalf("an error that is not errWebhook: %v", err)
			}
			return
		}
		if d.Decision != api.DecisionApprove && d.Decision != api.DecisionDeny || d.ArgumentsDigest == "" {
			t.Fatalf("accepted %q as %+v", raw, d)
		}
		var lenient api.WebhookDecision
		if err := json.Unmarshal(raw, &lenient); err != nil || lenient != *d {
			t.Fatalf("%q reads %+v strictly, %+v (%v) leniently", raw, d, lenient, err)
		}
	})
}
