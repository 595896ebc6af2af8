package verdictd

import (
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
)

// TestSignRederivesTheArgumentsDigest: a verdict_issued record whose arguments_digest does not
// cover its call_arguments gets no verdict, whatever produced it.
func TestSignRederivesTheArgumentsDigest(t *testing.T) {
	e := newEnv(t, envOpts{})
	args := map[string]any{"amount": 500000, "from_account": "1102534471", "to_account": "110-222-333"}
	good, err := canonical.Digest(args)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := canonical.Digest(map[string]any{"amount": 1})
	for _, tc := range []struct {
		name   string
		digest string
		signed bool
	}{
		{"matching", good, true},
		{"another call's digest", other, false},
	} {
		zero, akey, phase := 0, "u_01:send money:bank/transfer", api.PhaseAtTrigger
		d := tc.digest
		rec := &api.Record{
			RecordID: "rec_test", Principal: "u_01", Server: "bank", Tool: "transfer", PolicyVersion: "v",
			UnknownCount: &zero, Unmet: []api.Unmet{}, Outcome: api.OutcomeVerdictIssued,
			CallArguments: args, ArgumentsDigest: &d, ActionKey: &akey, Phase: &phase,
		}
		claims, err := e.svc.sign(e.svc.snap.Load().policy, rec, "sha256:"+good[7:])
		if signed := err == nil && rec.Verdict != nil; signed != tc.signed {
			t.Fatalf("%s: signed=%v (%v), want %v", tc.name, signed, err, tc.signed)
		}
		// The claims returned are the ones in the token.
		if tc.signed && (claims == nil || claims.ID != *rec.VerdictID || claims.Arguments != d || len(claims.Audience) == 0) {
			t.Fatalf("%s: claims %+v for verdict %s", tc.name, claims, *rec.VerdictID)
		}
	}
}
