package verdict

import (
	"testing"
	"time"

	"github.com/verdictgate/verdict/keys"
)

func TestReceipts(t *testing.T) {
	f := newFixture(t)
	exec, _ := keys.Generate(keys.EdDSA)
	execSet, _ := keys.NewSet(exec.Public())
	now := time.Unix(1_900_000_030, 0)
	want := ReceiptExpectation{
		Issuers: []TrustedIssuer{{ID: "executor-bank", Keys: execSet}},
		Now:     func() time.Time { return now },
		Skew:    5 * time.Second,
	}
	r := Receipt{
		Issuer: "executor-bank", ID: f.claims.ID, ActionKey: f.claims.ActionKey,
		Arguments: f.claims.Arguments, Decision: "executed", IssuedAt: now.Unix(),
	}
	tok, err := SignReceipt(exec, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyReceipt(tok, want)
	if err != nil {
		t.Fatal(err)
	}
	if *got != r {
		t.Fatalf("got %+v, want %+v", got, r)
	}

	// A verdict and a receipt never verify as each other, even signed by a key both trust.
	verdictWant := f.want
	verdictWant.Issuers = append(verdictWant.Issuers, TrustedIssuer{ID: "executor-bank", Keys: execSet})
	if _, err := Verify(tok, verdictWant); ReasonOf(err) != TypMismatch {
		t.Errorf("receipt as verdict: %v, want typ_mismatch", err)
	}
	want.Issuers = append(want.Issuers, f.want.Issuers...)
	if _, err := VerifyReceipt(f.token, want); ReasonOf(err) != TypMismatch {
		t.Errorf("verdict as receipt: %v, want typ_mismatch", err)
	}

	rc := map[string]any{"iss": r.Issuer, "jti": r.ID, "akey": r.ActionKey, "args": r.Arguments, "decision": r.Decision, "iat": r.IssuedAt}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range rc {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	hdr := map[string]any{"alg": "EdDSA", "kid": exec.KeyID(), "typ": TypeReceipt}
	tests := []struct {
		name  string
		token string
		err   Reason
	}{
		{"valid forged the same way", f.resign(exec, hdr, rc), ""},
		{"decision unknown", f.resign(exec, hdr, with("decision", "maybe")), Malformed},
		{"extra claim", f.resign(exec, hdr, with("exp", 1)), Malformed},
		{"iss another executor", f.resign(exec, hdr, with("iss", "executor-other")), IssuerNotTrusted},
		{"signed by verdictd's key", f.resign(f.a, map[string]any{"alg": "EdDSA", "kid": f.a.KeyID(), "typ": TypeReceipt}, rc), IssuerNotTrusted},
		{"signed by an untrusted key", f.resign(f.b, map[string]any{"alg": "EdDSA", "kid": f.b.KeyID(), "typ": TypeReceipt}, with("iss", issuerB)), UnknownKID},
		{"iat in the future", f.resign(exec, hdr, with("iat", now.Unix()+6)), NotYetValid},
		{"iat within skew", f.resign(exec, hdr, with("iat", now.Unix()+5)), ""},
		{"flipped bit", flipSignatureBit(tok), BadSignature},
		{"alg none", forge(nil, mustJSON(map[string]any{"alg": "none", "kid": exec.KeyID(), "typ": TypeReceipt}), mustJSON(rc)), AlgNotAllowed},
	}
	// Only receipt issuers here: verdictd's key is trusted for verdicts, not receipts.
	want.Issuers = []TrustedIssuer{{ID: "executor-bank", Keys: execSet}, {ID: issuerA, Keys: f.want.Issuers[0].Keys}}
	for _, name := range receiptMembers {
		tests = append(tests, struct {
			name  string
			token string
			err   Reason
		}{"missing " + name, f.resign(exec, hdr, with(name, nil)), Malformed})
	}
	for _, tt := range tests {
		if _, err := VerifyReceipt(tt.token, want); ReasonOf(err) != tt.err {
			t.Errorf("%s: reason %q, want %q (%v)", tt.name, ReasonOf(err), tt.err, err)
		}
	}
	if _, err := SignReceipt(exec, Receipt{Issuer: "x"}); err == nil {
		t.Error("SignReceipt accepted an incomplete receipt")
	}
}
