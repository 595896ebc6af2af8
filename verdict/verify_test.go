package verdict

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

func TestVerifyValid(t *testing.T) {
	f := newFixture(t)
	c, err := Verify(f.token, f.want)
	if err != nil {
		t.Fatal(err)
	}
	want := f.claims
	if mustJSON(c) != mustJSON(want) {
		t.Fatalf("claims\n got %s\nwant %s", mustJSON(c), mustJSON(want))
	}
	// The protected header is exactly alg, kid, typ.
	h, _, _ := parts(f.token)
	raw, _ := b64.DecodeString(h)
	var hdr map[string]any
	json.Unmarshal(raw, &hdr)
	if got := slices.Sorted(maps.Keys(hdr)); !slices.Equal(got, []string{"alg", "kid", "typ"}) {
		t.Fatalf("header members %v", got)
	}
	if hdr["typ"] != TypeVerdict || hdr["alg"] != "EdDSA" || hdr["kid"] != f.a.KeyID() {
		t.Fatalf("header %v", hdr)
	}
}

// TestVerifyTampered takes one valid verdict and changes one thing at a time. Claim tampering is
// re-signed with the rightful key, so the claim check, not the signature, must catch it.
func TestVerifyTampered(t *testing.T) {
	f := newFixture(t)
	edA := privateKey(t, f.a).(ed25519.PrivateKey)
	pubA := []byte(f.a.Public().Key().(ed25519.PublicKey))
	jwkA, _ := json.Marshal(jose.JSONWebKey{Key: f.a.Public().Key(), KeyID: f.a.KeyID()})
	stranger, _ := keys.Generate(keys.EdDSA)

	hdrWith := func(s *keys.Signer, k string, v any) map[string]any {
		h := f.header(s)
		if v == nil {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	claimsWith := func(k string, v any) map[string]any {
		m := f.claimsMap()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	validPayload := mustJSON(f.claimsMap())
	hA := mustJSON(f.header(f.a))
	ecdsaWant := f.want
	ecdsaWant.Algorithms = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}

	tests := []struct {
		name  string
		token string
		want  *Expectation // nil: f.want
		err   Reason       // "": must verify
	}{
		{"valid", f.token, nil, ""},
		{"valid, forged the same way", f.resign(f.a, f.header(f.a), f.claimsMap()), nil, ""},

		// Header: alg.
		{"alg none, no signature", forge(nil, mustJSON(hdrWith(f.a, "alg", "none")), validPayload), nil, AlgNotAllowed},
		{"alg none, with signature", forge(edA, mustJSON(hdrWith(f.a, "alg", "none")), validPayload), nil, AlgNotAllowed},
		{"HS256 keyed with the public key bytes", forge(pubA, mustJSON(hdrWith(f.a, "alg", "HS256")), validPayload), nil, AlgNotAllowed},
		{"HS256 keyed with the public JWK", forge(jwkA, mustJSON(hdrWith(f.a, "alg", "HS256")), validPayload), nil, AlgNotAllowed},
		{"alg RS256", forge(edA, mustJSON(hdrWith(f.a, "alg", "RS256")), validPayload), nil, AlgNotAllowed},
		{"alg lower case", forge(edA, mustJSON(hdrWith(f.a, "alg", "eddsa")), validPayload), nil, AlgNotAllowed},
		{"alg Ed25519 (not supported by the library yet)", forge(edA, mustJSON(hdrWith(f.a, "alg", "Ed25519")), validPayload), nil, AlgNotAllowed},
		{"alg not a string", forge(edA, mustJSON(hdrWith(f.a, "alg", 1)), validPayload), nil, Malformed},
		{"alg missing", forge(edA, mustJSON(hdrWith(f.a, "alg", nil)), validPayload), nil, Malformed},
		{"ES256 not configured", f.resign(f.ec, f.header(f.ec), f.claimsMap()), nil, AlgNotAllowed},
		{"ES256 configured", f.resign(f.ec, f.header(f.ec), f.claimsMap()), &ecdsaWant, ""},
		{"EdDSA header on an ES256 key", forge(edA, mustJSON(hdrWith(f.ec, "alg", "EdDSA")), validPayload), &ecdsaWant, AlgNotAllowed},
		{"ES256 header on an Ed25519 key", f.resign(f.ec, hdrWith(f.a, "alg", "ES256"), f.claimsMap()), &ecdsaWant, AlgNotAllowed},

		// Header: typ.
		{"typ missing", f.resign(f.a, hdrWith(f.a, "typ", nil), f.claimsMap()), nil, Malformed},
		{"typ JWT", f.resign(f.a, hdrWith(f.a, "typ", "JWT"), f.claimsMap()), nil, TypMismatch},
		{"typ other case", f.resign(f.a, hdrWith(f.a, "typ", "Verdict+JWT"), f.claimsMap()), nil, TypMismatch},
		{"typ receipt", f.resign(f.a, hdrWith(f.a, "typ", TypeReceipt), f.claimsMap()), nil, TypMismatch},

		// Header: kid.
		{"kid missing", f.resign(f.a, hdrWith(f.a, "kid", nil), f.claimsMap()), nil, Malformed},
		{"kid unknown", f.resign(f.a, hdrWith(f.a, "kid", "no-such-kid"), f.claimsMap()), nil, UnknownKID},
		{"untrusted well-formed key", f.resign(stranger, f.header(stranger), f.claimsMap()), nil, UnknownKID},
		{"kid of issuer B on a token claiming A", f.resign(f.b, f.header(f.b), f.claimsMap()), nil, IssuerNotTrusted},
		{"kid of A, signed by B's key", f.resign(f.b, f.header(f.a), f.claimsMap()), nil, BadSignature},

		// Header: anything else.
		{"crit", f.resign(f.a, hdrWith(f.a, "crit", []string{"exp"}), f.claimsMap()), nil, Malformed},
		{"crit b64", f.resign(f.a, hdrWith(f.a, "crit", []string{"b64"}), f.claimsMap()), nil, Malformed},
		{"b64 false", f.resign(f.a, hdrWith(f.a, "b64", false), f.claimsMap()), nil, Malformed},
		{"jku", f.resign(f.a, hdrWith(f.a, "jku", "https://evil.example/jwks.json"), f.claimsMap()), nil, Malformed},
		{"x5u", f.resign(f.a, hdrWith(f.a, "x5u", "https://evil.example/cert.pem"), f.claimsMap()), nil, Malformed},
		{"jwk", f.resign(f.a, hdrWith(f.a, "jwk", json.RawMessage(jwkA)), f.claimsMap()), nil, Malformed},
		{"zip", f.resign(f.a, hdrWith(f.a, "zip", "DEF"), f.claimsMap()), nil, Malformed},
		{"cty", f.resign(f.a, hdrWith(f.a, "cty", "JWT"), f.claimsMap()), nil, Malformed},
		{"x5c", f.resign(f.a, hdrWith(f.a, "x5c", []string{}), f.claimsMap()), nil, Malformed},
		{"unknown member", f.resign(f.a, hdrWith(f.a, "foo", "bar"), f.claimsMap()), nil, Malformed},
		{"upper-case ALG beside alg", f.resign(f.a, hdrWith(f.a, "ALG", "none"), f.claimsMap()), nil, Malformed},
		{"duplicate alg", forge(edA, `{"alg":"none","alg":"EdDSA","kid":"`+f.a.KeyID()+`","typ":"verdict+jwt"}`, validPayload), nil, Malformed},
		{"duplicate typ", forge(edA, `{"alg":"EdDSA","kid":"`+f.a.KeyID()+`","typ":"x","typ":"verdict+jwt"}`, validPayload), nil, Malformed},
		{"header is an array", forge(edA, `["alg","EdDSA"]`, validPayload), nil, Malformed},
		{"header with trailing data", forge(edA, hA+`{}`, validPayload), nil, Malformed},
		{"header not UTF-8", forge(edA, `{"alg":"EdDSA","kid":"`+f.a.KeyID()+`","typ":"verdict+jwt\xff"}`, validPayload), nil, Malformed},

		// Claims: unknown, duplicate, non-object.
		{"extra claim", f.resign(f.a, f.header(f.a), claimsWith("admin", true)), nil, Malformed},
		{"claim in other case", f.resign(f.a, f.header(f.a), claimsWith("ISS", issuerA)), nil, Malformed},
		{"duplicate args", f.resign(f.a, f.header(f.a), strings.Replace(validPayload, `"akey"`, `"args":"`+digestOf("x")+`","akey"`, 1)), nil, Malformed},
		{"payload not JSON", f.resign(f.a, f.header(f.a), "not json"), nil, Malformed},
		{"payload an array", f.resign(f.a, f.header(f.a), "[]"), nil, Malformed},
		{"payload with trailing object", f.resign(f.a, f.header(f.a), validPayload+"{}"), nil, Malformed},

		// Claims checked by Verify.
		{"iss changed to issuer B", f.resign(f.a, f.header(f.a), claimsWith("iss", issuerB)), nil, IssuerNotTrusted},
		{"iss changed to a stranger", f.resign(f.a, f.header(f.a), claimsWith("iss", "evil")), nil, IssuerNotTrusted},
		{"aud without us", f.resign(f.a, f.header(f.a), claimsWith("aud", []string{"executor-other"})), nil, AudienceMismatch},
		{"aud a string", f.resign(f.a, f.header(f.a), claimsWith("aud", audience)), nil, Malformed},
		{"aud empty", f.resign(f.a, f.header(f.a), claimsWith("aud", []string{})), nil, Malformed},
		{"srv unknown", f.resign(f.a, f.header(f.a), claimsWith("srv", "shop")), nil, UnknownTool},
		{"tool unknown", f.resign(f.a, f.header(f.a), claimsWith("tool", "wire")), nil, UnknownTool},
		{"tool another known tool", f.resign(f.a, f.header(f.a), claimsWith("tool", "refund")), nil, SchemaChanged},
		{"tsd changed", f.resign(f.a, f.header(f.a), claimsWith("tsd", digestOf("transfer v0"))), nil, SchemaChanged},
		{"tsd upper-case hex", f.resign(f.a, f.header(f.a), claimsWith("tsd", strings.ToUpper(f.claims.ToolDigest))), nil, Malformed},
		{"args changed", f.resign(f.a, f.header(f.a), claimsWith("args", digestOf(`{"amount":5000000}`))), nil, ArgumentsMismatch},
		{"args not a digest", f.resign(f.a, f.header(f.a), claimsWith("args", `{"amount":500000}`)), nil, Malformed},
		{"exp before iat", f.resign(f.a, f.header(f.a), claimsWith("exp", f.now.Unix()-1)), nil, Malformed},
		{"exp fractional", f.resign(f.a, f.header(f.a), claimsWith("exp", json.Number("1900000060.5"))), nil, Malformed},
		{"exp exponent", f.resign(f.a, f.header(f.a), claimsWith("exp", json.Number("1.90000006e9"))), nil, Malformed},
		{"exp a string", f.resign(f.a, f.header(f.a), claimsWith("exp", "1900000060")), nil, Malformed},
		{"exp huge", f.resign(f.a, f.header(f.a), claimsWith("exp", json.Number("99999999999999999999"))), nil, Malformed},
		{"iat zero", f.resign(f.a, f.header(f.a), claimsWith("iat", 0)), nil, Malformed},
		{"jti short", f.resign(f.a, f.header(f.a), claimsWith("jti", "AAAAAAAA")), nil, Malformed},
		{"jti not base64url", f.resign(f.a, f.header(f.a), claimsWith("jti", "++++++++++++++++++++++++")), nil, Malformed},
		{"jti with a newline the strict decoder would skip", f.resign(f.a, f.header(f.a), claimsWith("jti", f.claims.ID[:11]+"\n"+f.claims.ID[11:])), nil, Malformed},
		{"slot unknown", f.resign(f.a, f.header(f.a), claimsWith("slots", []map[string]any{{"id": "x", "status": "unknown", "source": nil}})), nil, Malformed},
		{"slot source missing", f.resign(f.a, f.header(f.a), claimsWith("slots", []map[string]any{{"id": "x", "status": "known"}})), nil, Malformed},
		{"slot bad source", f.resign(f.a, f.header(f.a), claimsWith("slots", []map[string]any{{"id": "x", "status": "known", "source": "model"}})), nil, Malformed},
		{"slots null", f.resign(f.a, f.header(f.a), claimsWith("slots", json.RawMessage("null"))), nil, Malformed},
		{"slots empty", f.resign(f.a, f.header(f.a), claimsWith("slots", []any{})), nil, ""},
		{"phase unknown", f.resign(f.a, f.header(f.a), claimsWith("phase", "later")), nil, Malformed},
		{"sub null", f.resign(f.a, f.header(f.a), claimsWith("sub", json.RawMessage("null"))), nil, Malformed},

		// Whole-token shape.
		{"empty", "", nil, Malformed},
		{"two parts", hA + "." + b64.EncodeToString([]byte(validPayload)), nil, Malformed},
		{"four parts", f.token + ".AAAA", nil, Malformed},
		{"padding", strings.Replace(f.token, ".", "=.", 1), nil, Malformed},
		{"standard base64 signature", stdSignature(f.token), nil, Malformed},
		{"'+' in the signature", f.token[:strings.LastIndex(f.token, ".")+1] + "+" + f.token[strings.LastIndex(f.token, ".")+2:], nil, Malformed},
		{"leading space", " " + f.token, nil, Malformed},
		{"newline inside the header", f.token[:10] + "\n" + f.token[10:], nil, Malformed},
		{"carriage return inside the header", f.token[:10] + "\r" + f.token[10:], nil, Malformed},
		{"1 MiB token", f.token[:strings.LastIndex(f.token, ".")] + "." + strings.Repeat("A", 1<<20), nil, Malformed},
		{"JSON serialization", jsonSerialization(t, f.token, ""), nil, Malformed},
		{"JSON serialization, two signatures", jsonSerialization(t, f.token, f.resign(f.b, f.header(f.b), f.claimsMap())), nil, Malformed},
		{"flipped signature bit", flipSignatureBit(f.token), nil, BadSignature},
		{"empty signature", f.token[:strings.LastIndex(f.token, ".")+1], nil, BadSignature},
		{"payload swapped between two valid tokens", swapPayload(f.token, f.resign(f.a, f.header(f.a), claimsWith("args", digestOf("other")))), nil, BadSignature},
		{"claims tampered, not re-signed", swapPayload(f.token, forge(nil, hA, mustJSON(claimsWith("aud", []string{"executor-other"})))), nil, BadSignature},
	}
	// Every claim: missing is malformed; the wrong JSON type is malformed; changed without
	// re-signing is a bad signature; changed and re-signed, the claims Verify can compare are
	// refused above, and the rest (bound by the signature, with nothing to compare them to here)
	// verify and come back as signed.
	for _, name := range claimMembers {
		tests = append(tests,
			struct {
				name  string
				token string
				want  *Expectation
				err   Reason
			}{"claim " + name + " missing", f.resign(f.a, f.header(f.a), claimsWith(name, nil)), nil, Malformed},
			struct {
				name  string
				token string
				want  *Expectation
				err   Reason
			}{"claim " + name + " wrong type", f.resign(f.a, f.header(f.a), claimsWith(name, map[string]any{})), nil, Malformed},
			struct {
				name  string
				token string
				want  *Expectation
				err   Reason
			}{"claim " + name + " changed, not re-signed", swapPayload(f.token, forge(nil, hA, mustJSON(claimsWith(name, tamperedValue(name))))), nil, BadSignature},
		)
	}
	for _, name := range []string{"sub", "pol", "akey", "phase", "rec", "slots", "jti", "nbf"} {
		tests = append(tests, struct {
			name  string
			token string
			want  *Expectation
			err   Reason
		}{"claim " + name + " changed and re-signed", f.resign(f.a, f.header(f.a), claimsWith(name, tamperedValue(name))), nil, ""})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := f.want
			if tt.want != nil {
				want = *tt.want
			}
			c, err := Verify(tt.token, want)
			if got := ReasonOf(err); got != tt.err {
				t.Fatalf("reason %q, want %q (err: %v)", got, tt.err, err)
			}
			if err == nil && c == nil {
				t.Fatal("nil claims without error")
			}
			if err != nil && c != nil {
				t.Fatal("claims returned with an error")
			}
		})
	}
}

// tamperedValue is a different but well-formed value for a claim.
func tamperedValue(name string) any {
	switch name {
	case "aud":
		return []string{"executor-bank", "executor-x"}
	case "iat":
		return 1_900_000_001
	case "nbf":
		return 1_899_999_990
	case "exp":
		return 1_900_000_050
	case "jti":
		id, _ := NewID()
		return id
	case "tsd", "args":
		return digestOf("tampered")
	case "slots":
		return []map[string]any{{"id": "amount", "status": "null", "source": nil}}
	case "phase":
		return "at_instruction"
	}
	return "tampered"
}

func swapPayload(dst, src string) string {
	h, _, s := parts(dst)
	_, p, _ := parts(src)
	return h + "." + p + "." + s
}

func stdSignature(tok string) string {
	h, p, s := parts(tok)
	sig, _ := b64.DecodeString(s)
	return h + "." + p + "." + base64.StdEncoding.EncodeToString(sig)
}

func flipSignatureBit(tok string) string {
	h, p, s := parts(tok)
	sig, _ := b64.DecodeString(s)
	sig[10] ^= 0x04
	return h + "." + p + "." + b64.EncodeToString(sig)
}

// jsonSerialization re-encodes compact tokens as one JWS JSON serialization: flattened for one,
// general (two signatures) for two.
func jsonSerialization(t *testing.T, tok, second string) string {
	h, p, s := parts(tok)
	if second == "" {
		return mustJSON(map[string]string{"protected": h, "payload": p, "signature": s})
	}
	h2, _, s2 := parts(second)
	return mustJSON(map[string]any{"payload": p, "signatures": []map[string]string{
		{"protected": h, "signature": s}, {"protected": h2, "signature": s2},
	}})
}

func TestVerifyTimeBoundaries(t *testing.T) {
	f := newFixture(t)
	skew := f.want.Skew
	iat := time.Unix(f.claims.IssuedAt, 0)
	exp := time.Unix(f.claims.Expiry, 0)
	tests := []struct {
		name string
		now  time.Time
		err  Reason
	}{
		{"at iat", iat, ""},
		{"just before exp+skew", exp.Add(skew - time.Nanosecond), ""},
		{"exactly exp+skew", exp.Add(skew), Expired},
		{"one second past exp+skew", exp.Add(skew + time.Second), Expired},
		{"exactly nbf-skew", iat.Add(-skew), ""},
		{"just before nbf-skew", iat.Add(-skew - time.Nanosecond), NotYetValid},
		{"long before nbf", iat.Add(-time.Hour), NotYetValid},
	}
	for _, tt := range tests {
		want := f.want
		want.Now = func() time.Time { return tt.now }
		if _, err := Verify(f.token, want); ReasonOf(err) != tt.err {
			t.Errorf("%s: reason %q, want %q (%v)", tt.name, ReasonOf(err), tt.err, err)
		}
	}

	// iat in the future (nbf earlier) is not yet valid beyond the skew.
	c := f.claims
	c.NotBefore = c.IssuedAt - 100
	c.IssuedAt += 10
	c.Expiry = c.IssuedAt + 60
	tok, err := Sign(f.a, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		now time.Time
		err Reason
	}{
		{time.Unix(c.IssuedAt, 0).Add(-skew), ""},
		{time.Unix(c.IssuedAt, 0).Add(-skew - time.Nanosecond), NotYetValid},
	} {
		want := f.want
		want.Now = func() time.Time { return tt.now }
		if _, err := Verify(tok, want); ReasonOf(err) != tt.err {
			t.Errorf("future iat at %v: reason %q, want %q (%v)", tt.now, ReasonOf(err), tt.err, err)
		}
	}

	// exp-iat exactly the maximum TTL is accepted; one second more is not.
	for _, tt := range []struct {
		ttl time.Duration
		err Reason
	}{
		{f.want.MaxTTL, ""},
		{f.want.MaxTTL + time.Second, TTLTooLong},
		{24 * time.Hour, TTLTooLong},
	} {
		c := f.claims
		c.Expiry = c.IssuedAt + int64(tt.ttl/time.Second)
		tok, err := Sign(f.a, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(tok, f.want); ReasonOf(err) != tt.err {
			t.Errorf("ttl %s: reason %q, want %q (%v)", tt.ttl, ReasonOf(err), tt.err, err)
		}
	}
	// Without a configured maximum, DefaultMaxTTL applies.
	c = f.claims
	c.Expiry = c.IssuedAt + int64(DefaultMaxTTL/time.Second) + 1
	tok, _ = Sign(f.a, c)
	want := f.want
	want.MaxTTL = 0
	if _, err := Verify(tok, want); ReasonOf(err) != TTLTooLong {
		t.Errorf("default max TTL: %v", err)
	}
}

func TestVerifyOrder(t *testing.T) {
	// When several things are wrong, the first in contract order wins.
	f := newFixture(t)
	stranger, _ := keys.Generate(keys.EdDSA)
	m := f.claimsMap()
	m["aud"] = []string{"nobody"}
	m["args"] = digestOf("x")
	h := f.header(stranger)
	h["typ"] = TypeReceipt
	tests := []struct {
		name  string
		token string
		err   Reason
	}{
		{"typ wrong and kid unknown", f.resign(stranger, h, m), TypMismatch},
		{"kid unknown and aud wrong", f.resign(stranger, f.header(stranger), m), UnknownKID},
		{"aud and args wrong", f.resign(f.a, f.header(f.a), m), AudienceMismatch},
	}
	for _, tt := range tests {
		if _, err := Verify(tt.token, f.want); ReasonOf(err) != tt.err {
			t.Errorf("%s: reason %q, want %q (%v)", tt.name, ReasonOf(err), tt.err, err)
		}
	}
}

func TestVerifyExpectationFailsClosed(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		edit func(*Expectation)
		err  Reason
	}{
		{"no issuers", func(e *Expectation) { e.Issuers = nil }, UnknownKID},
		{"issuer without keys", func(e *Expectation) { e.Issuers = []TrustedIssuer{{ID: issuerA}} }, UnknownKID},
		{"empty audience", func(e *Expectation) { e.Audience = "" }, AudienceMismatch},
		{"no tool lookup", func(e *Expectation) { e.ToolDigest = nil }, UnknownTool},
		{"no arguments digest", func(e *Expectation) { e.ArgumentsDigest = "" }, ArgumentsMismatch},
		{"only unsupported algorithms", func(e *Expectation) { e.Algorithms = []jose.SignatureAlgorithm{jose.HS256} }, AlgNotAllowed},
		{"ES256 only", func(e *Expectation) { e.Algorithms = []jose.SignatureAlgorithm{keys.ES256} }, AlgNotAllowed},
		{"same key listed by two issuers", func(e *Expectation) {
			set, _ := keys.NewSet(f.a.Public())
			e.Issuers = append(e.Issuers, TrustedIssuer{ID: "verdictd-c", Keys: set})
		}, IssuerNotTrusted},
		{"same issuer listed twice", func(e *Expectation) { e.Issuers = append(e.Issuers, e.Issuers[0]) }, ""},
	}
	for _, tt := range tests {
		want := f.want
		want.Issuers = slices.Clone(want.Issuers)
		tt.edit(&want)
		if _, err := Verify(f.token, want); ReasonOf(err) != tt.err {
			t.Errorf("%s: reason %q, want %q (%v)", tt.name, ReasonOf(err), tt.err, err)
		}
	}
}

func TestRotation(t *testing.T) {
	f := newFixture(t)
	ring, err := keys.NewRing(f.a)
	if err != nil {
		t.Fatal(err)
	}
	want := f.want
	want.Issuers = []TrustedIssuer{{ID: issuerA, Keys: ring}}

	old, err := Sign(ring.Current(), f.claims)
	if err != nil {
		t.Fatal(err)
	}
	next, _ := keys.Generate(keys.EdDSA)
	if err := ring.Rotate(next); err != nil {
		t.Fatal(err)
	}
	fresh, err := Sign(ring.Current(), f.claims)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := parts(fresh); !strings.Contains(string(must(b64.DecodeString(h))), next.KeyID()) {
		t.Fatal("after rotation the ring does not sign with the new key")
	}
	for name, tok := range map[string]string{"old": old, "fresh": fresh} {
		if _, err := Verify(tok, want); err != nil {
			t.Fatalf("%s token after rotation: %v", name, err)
		}
	}
	if err := ring.Retire(f.a.KeyID()); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(old, want); ReasonOf(err) != UnknownKID {
		t.Fatalf("old token after its key was retired: %v, want unknown_kid", err)
	}
	if _, err := Verify(fresh, want); err != nil {
		t.Fatalf("fresh token after retiring the old key: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSignRefusesIncompleteClaims(t *testing.T) {
	f := newFixture(t)
	for name, edit := range map[string]func(*Claims){
		"no iss":       func(c *Claims) { c.Issuer = "" },
		"no aud":       func(c *Claims) { c.Audience = nil },
		"no jti":       func(c *Claims) { c.ID = "" },
		"no exp":       func(c *Claims) { c.Expiry = 0 },
		"bad args":     func(c *Claims) { c.Arguments = "abc" },
		"unknown slot": func(c *Claims) { c.Slots = []Slot{{ID: "x", Status: "unknown"}} },
		"no phase":     func(c *Claims) { c.Phase = "" },
	} {
		c := f.claims
		edit(&c)
		if _, err := Sign(f.a, c); err == nil {
			t.Errorf("%s: Sign succeeded", name)
		}
	}
	c := f.claims
	c.Slots = nil
	tok, err := Sign(f.a, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(tok, f.want)
	if err != nil || got.Slots == nil || len(got.Slots) != 0 {
		t.Fatalf("nil slots should sign as []: %v %v", got, err)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if b, err := b64.Strict().DecodeString(id); err != nil || len(b) < 16 {
			t.Fatalf("id %q: %d bytes, %v", id, len(b), err)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

// An id is the millisecond time, then 128 random bits: ids of the same moment share their
// first 6 bytes and nothing else.
func TestNewIDForm(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 12, 3, 456_000_000, time.UTC)
	a, err := newIDAt(at)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newIDAt(at)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 30 {
		t.Fatalf("id %q has %d characters, want 30", a, len(a))
	}
	ra, err := b64.Strict().DecodeString(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := b64.Strict().DecodeString(b)
	var ms [8]byte
	copy(ms[2:], ra[:6])
	if got := int64(binary.BigEndian.Uint64(ms[:])); got != at.UnixMilli() {
		t.Fatalf("prefix %d, want %d", got, at.UnixMilli())
	}
	if !bytes.Equal(ra[:6], rb[:6]) || bytes.Equal(ra[6:], rb[6:]) {
		t.Fatalf("ids %q and %q: want the same prefix and different random parts", a, b)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	_, err := Verify(flipSignatureBit(f.token), f.want)
	var e *Error
	if !errors.As(err, &e) || e.Reason != BadSignature {
		t.Fatalf("err %v is not an *Error with bad_signature", err)
	}
	if !errors.Is(err, &Error{Reason: BadSignature}) || errors.Is(err, ErrReplayed) {
		t.Fatal("errors.Is does not match by reason")
	}
	wrapped := errors.Join(errors.New("nonce store"), ErrReplayed)
	if !errors.Is(wrapped, ErrReplayed) || ReasonOf(wrapped) != Replayed {
		t.Fatalf("wrapped ErrReplayed: reason %q", ReasonOf(wrapped))
	}
	if ReasonOf(errors.New("disk full")) != "" || ReasonOf(nil) != "" {
		t.Fatal("ReasonOf invents a reason")
	}
	if !strings.Contains(err.Error(), "bad_signature") {
		t.Fatalf("message %q lacks the reason", err)
	}
}

func TestVerifySoleAudience(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		aud  []string
		err  Reason
	}{
		{"this executor alone", []string{audience}, ""},
		{"this executor twice", []string{audience, audience}, ""},
		{"another executor too", []string{"executor-other", audience}, AudienceMismatch},
		{"another executor first", []string{audience, "executor-other"}, AudienceMismatch},
		{"another executor only", []string{"executor-other"}, AudienceMismatch},
	}
	for _, tt := range tests {
		c := f.claims
		c.Audience = tt.aud
		tok, err := Sign(f.a, c)
		if err != nil {
			t.Fatal(err)
		}
		want := f.want
		want.SoleAudience = true
		if _, err := Verify(tok, want); ReasonOf(err) != tt.err {
			t.Errorf("%s: reason %q, want %q (%v)", tt.name, ReasonOf(err), tt.err, err)
		}
		// Without SoleAudience, any aud that names this executor passes.
		want.SoleAudience = false
		if _, err := Verify(tok, want); (err == nil) != slices.Contains(tt.aud, audience) {
			t.Errorf("%s without SoleAudience: %v", tt.name, err)
		}
	}
}

// A refusal decided after the signature verified with a trusted key carries the claims it
// refused; an earlier one carries none, since nobody vouches for them.
func TestRefusalClaims(t *testing.T) {
	f := newFixture(t)
	with := func(change func(*Expectation)) Expectation {
		w := f.want
		change(&w)
		return w
	}
	untrustedA := with(func(w *Expectation) { w.Issuers = []TrustedIssuer{{ID: "other", Keys: w.Issuers[0].Keys}} })
	for _, tc := range []struct {
		name   string
		token  string
		want   Expectation
		reason Reason
		claims bool
	}{
		{"bad signature", flipSignatureBit(f.token), f.want, BadSignature, false},
		{"unknown kid", f.token, with(func(w *Expectation) { w.Issuers = w.Issuers[1:] }), UnknownKID, false},
		{"issuer not trusted", f.token, untrustedA, IssuerNotTrusted, true},
		{"audience mismatch", f.token, with(func(w *Expectation) { w.Audience = "executor-third" }), AudienceMismatch, true},
		{"arguments mismatch", f.token, with(func(w *Expectation) { w.ArgumentsDigest = digestOf("x") }), ArgumentsMismatch, true},
	} {
		_, err := Verify(tc.token, tc.want)
		var e *Error
		if !errors.As(err, &e) || e.Reason != tc.reason {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.reason)
		}
		if got := e.Claims != nil; got != tc.claims {
			t.Errorf("%s: claims %v, want %v", tc.name, got, tc.claims)
		} else if got && e.Claims.ID != f.claims.ID {
			t.Errorf("%s: claims of jti %q, want %q", tc.name, e.Claims.ID, f.claims.ID)
		}
	}
}
