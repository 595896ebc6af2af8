package verdictd

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/verdictgate/verdict/api"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/httpx"
)

func FuzzParseReceiptBody(f *testing.F) {
	f.Add("application/jose", []byte("eyJh.eyJi.c2ln"))
	f.Add("application/json", []byte(`"eyJh.eyJi.c2ln"`))
	f.Add("application/json", []byte(`{"receipt":"eyJh.eyJi.c2ln"}`))
	f.Add("", []byte(`{"receipt":"a","x":1}`))
	f.Add("text/plain", []byte(" \n"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		tok, err := ParseReceiptBody(ct, body)
		if err != nil {
			return
		}
		if tok == "" || len(tok) > 64<<10 {
			t.Fatalf("accepted %q", tok)
		}
		for _, c := range tok {
			if !strings.ContainsRune("-_.0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", c) {
				t.Fatalf("token with %q", c)
			}
		}
	})
}

// FuzzPreflight feeds arbitrary bodies to a real service (inline tool, real bbolt file). A body
// is either refused with a 4xx code and nothing stored, or decided; a verdict is only ever
// issued for a record whose arguments digest is the digest of its call arguments.
func FuzzPreflight(f *testing.F) {
	f.Add(oneShotRequest("c1"))
	f.Add([]byte(`{"principal":"u_01","phase":"at_trigger","action_key":"u_01:send money:pay/transfer"}`))
	f.Add([]byte(`{"principal":"u","server":"pay","tool":"transfer","instruction":"send money","intent":{"when_case":"later"}}`))
	f.Add([]byte(`{"principal":"u","server":"pay","tool":"transfer","instruction":[],"candidates":[{"field":"amount","value":1e400}]}`))
	e := newEnv(f, envOpts{policy: inlinePolicy})
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := e.svc.Preflight(context.Background(), body)
		if err != nil {
			var re *gates.RequestError
			var he *httpx.Error
			if !errors.As(err, &re) && !errors.As(err, &he) {
				t.Fatalf("not a request error: %v", err)
			}
			return
		}
		if !json.Valid(res.JSON) {
			t.Fatalf("record is not JSON: %s", res.JSON)
		}
		rec := res.Record
		if rec.Outcome != api.OutcomeVerdictIssued {
			if rec.Verdict != nil || rec.VerdictID != nil {
				t.Fatalf("verdict on a %s record", rec.Outcome)
			}
			return
		}
		d, err := canonical.Digest(rec.CallArguments)
		if err != nil || rec.ArgumentsDigest == nil || d != *rec.ArgumentsDigest || rec.Verdict == nil {
			t.Fatalf("issued record does not bind its arguments: %v %v", d, err)
		}
		if *rec.UnknownCount != 0 || len(rec.Unmet) != 0 {
			t.Fatalf("verdict with open items")
		}
	})
}
