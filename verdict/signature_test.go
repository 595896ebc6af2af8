package verdict

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

// goJoseVerifies is go-jose's answer for the signature, which verifySignature stands in for:
// its compact parse with the one alg, then its Verify.
func goJoseVerifies(tok string, key keys.PublicKey) bool {
	obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{key.Algorithm()})
	if err != nil {
		return false
	}
	_, err = obj.Verify(key.Key())
	return err == nil
}

func withSig(tok string, sig []byte) string {
	return tok[:strings.LastIndex(tok, ".")+1] + b64.EncodeToString(sig)
}

// TestSignatureECDSAHighS: (r, n-s) is a second valid ES256 signature of the same token, which
// go-jose and crypto/ecdsa both accept (neither asks for the low S): a verdict's single use is
// held by its jti, never by the token's bytes (doc.go). R or S out of range is bad_signature.
func TestSignatureECDSAHighS(t *testing.T) {
	f := newFixture(t)
	want := f.want
	want.Algorithms = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}
	tok := f.resign(f.ec, f.header(f.ec), f.claimsMap())
	_, _, s := parts(tok)
	sig, _ := b64.DecodeString(s)
	n := elliptic.P256().Params().N
	sv := new(big.Int).SetBytes(sig[32:])
	hs := new(big.Int).Sub(n, sv)
	mal := append([]byte(nil), sig...)
	hs.FillBytes(mal[32:])
	malTok := withSig(tok, mal)
	_, err := Verify(malTok, want)
	if (err == nil) != goJoseVerifies(malTok, f.ec.Public()) {
		t.Fatal("disagree on high-S")
	}
	// r or s out of range: r=0, s=0, s=n, s=n+small wrap, r=n.
	for name, mut := range map[string]func([]byte){
		"r=0": func(b []byte) { clear(b[:32]) },
		"s=0": func(b []byte) { clear(b[32:]) },
		"s=n": func(b []byte) { n.FillBytes(b[32:]) },
		"r=n": func(b []byte) { n.FillBytes(b[:32]) },
		"s=2^256-1": func(b []byte) {
			for i := 32; i < 64; i++ {
				b[i] = 0xff
			}
		},
	} {
		b := append([]byte(nil), sig...)
		mut(b)
		x := withSig(tok, b)
		_, err := Verify(x, want)
		if ReasonOf(err) != BadSignature || goJoseVerifies(x, f.ec.Public()) {
			t.Errorf("%s: reason %v, go-jose %v", name, ReasonOf(err), goJoseVerifies(x, f.ec.Public()))
		}
	}
}

// Signatures of every length around the right one, both algorithms: bad_signature, and go-jose
// agrees.
func TestSignatureSignatureLengths(t *testing.T) {
	f := newFixture(t)
	want := f.want
	want.Algorithms = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}
	for _, s := range []*keys.Signer{f.a, f.ec} {
		tok := f.resign(s, f.header(s), f.claimsMap())
		_, _, raw := parts(tok)
		sig, _ := b64.DecodeString(raw)
		for _, n := range []int{0, 1, 31, 32, 33, 63, 65, 96, 128} {
			b := make([]byte, n)
			copy(b, sig)
			x := withSig(tok, b)
			_, err := Verify(x, want)
			if ReasonOf(err) != BadSignature {
				t.Errorf("%s sig len %d: %v", s.Algorithm(), n, err)
			}
			if goJoseVerifies(x, s.Public()) {
				t.Errorf("%s sig len %d: go-jose accepts", s.Algorithm(), n)
			}
		}
		// the right signature with a trailing zero byte, and with a leading one
		for _, b := range [][]byte{append(append([]byte(nil), sig...), 0), append([]byte{0}, sig...)} {
			x := withSig(tok, b)
			if _, err := Verify(x, want); ReasonOf(err) != BadSignature {
				t.Errorf("%s padded sig: %v", s.Algorithm(), err)
			}
		}
	}
}

// Alg confusion both ways, with signatures that are valid for the other algorithm.
func TestSignatureAlgConfusion(t *testing.T) {
	f := newFixture(t)
	want := f.want
	want.Algorithms = []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}
	edA := privateKey(t, f.a).(ed25519.PrivateKey)
	ecK := privateKey(t, f.ec).(*ecdsa.PrivateKey)
	payload := mustJSON(f.claimsMap())
	hdr := func(alg, kid string) string {
		return mustJSON(map[string]any{"alg": alg, "kid": kid, "typ": TypeVerdict})
	}
	for name, tok := range map[string]string{
		"EdDSA header, ES256 kid, Ed sig":   forge(edA, hdr("EdDSA", f.ec.KeyID()), payload),
		"EdDSA header, ES256 kid, EC sig":   forge(ecK, hdr("EdDSA", f.ec.KeyID()), payload),
		"ES256 header, EdDSA kid, EC sig":   forge(ecK, hdr("ES256", f.a.KeyID()), payload),
		"ES256 header, EdDSA kid, Ed sig":   forge(edA, hdr("ES256", f.a.KeyID()), payload),
		"ES256 header, ES256 kid, Ed sig":   forge(edA, hdr("ES256", f.ec.KeyID()), payload),
		"EdDSA header, EdDSA kid, EC sig":   forge(ecK, hdr("EdDSA", f.a.KeyID()), payload),
		"ES256 only, EdDSA token (default)": f.token,
	} {
		w := want
		if strings.HasSuffix(name, "(default)") {
			w.Algorithms = []jose.SignatureAlgorithm{keys.ES256}
		}
		_, err := Verify(tok, w)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Non-canonical base64 in each part: malformed, and the part otherwise decodes to the same bytes.
func TestSignatureNonCanonicalParts(t *testing.T) {
	f := newFixture(t)
	h, p, s := parts(f.token)
	bump := func(x string) string {
		// Set the unused low bits of the last character, where the length leaves any.
		last := x[len(x)-1]
		v := base64URLValue[last]
		var mask byte
		switch len(x) % 4 {
		case 2:
			mask = 0x0f
		case 3:
			mask = 0x03
		default:
			return ""
		}
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		return x[:len(x)-1] + string(alphabet[v|mask])
	}
	for name, tok := range map[string]string{
		"header":    bump(h) + "." + p + "." + s,
		"payload":   h + "." + bump(p) + "." + s,
		"signature": h + "." + p + "." + bump(s),
	} {
		if tok == "" || strings.HasPrefix(tok, ".") || strings.Contains(tok, "..") {
			continue
		}
		if _, err := Verify(tok, f.want); ReasonOf(err) != Malformed {
			t.Errorf("%s non-canonical: %v", name, err)
		}
	}
}

// A token of exactly MaxTokenBytes is read; one byte more is malformed before anything else.
func TestSignatureMaxTokenBytes(t *testing.T) {
	f := newFixture(t)
	c := f.claims
	for pad := 0; ; pad++ {
		c.Record = "rec_" + strings.Repeat("x", 48000+pad)
		tok, err := Sign(f.a, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) < MaxTokenBytes {
			continue
		}
		if len(tok) == MaxTokenBytes {
			if _, err := Verify(tok, f.want); err != nil {
				t.Fatalf("token of exactly MaxTokenBytes: %v", err)
			}
		}
		if len(tok) > MaxTokenBytes {
			if _, err := Verify(tok, f.want); ReasonOf(err) != Malformed {
				t.Fatalf("token of %d bytes: %v", len(tok), err)
			}
		}
		if len(tok) > MaxTokenBytes {
			break
		}
	}
}

// Weak (low-order) Ed25519 keys never become a keys.PublicKey, so verifySignature, which has
// no check of its own, never sees one; and a JWKS with a bad key of any kind is refused whole.
func TestSignatureWeakAndWrongKeys(t *testing.T) {
	var zero [32]byte
	one := [32]byte{1}
	for _, k := range [][32]byte{zero, one} {
		if _, err := keys.NewPublicKey(ed25519.PublicKey(k[:])); err == nil {
			t.Errorf("low-order key %x accepted", k)
		}
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := keys.NewPublicKey(&p384.PublicKey); err == nil {
		t.Error("P-384 key accepted")
	}
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	x := b64.EncodeToString(ed)
	for name, jwk := range map[string]string{
		"ed x 31 bytes":   `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(ed[:31]) + `","kid":"k"}`,
		"ed x 33 bytes":   `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(append(append([]byte(nil), ed...), 0)) + `","kid":"k"}`,
		"ed alg ES256":    `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","alg":"ES256"}`,
		"x25519":          `{"kty":"OKP","crv":"X25519","x":"` + x + `"}`,
		"oct":             `{"kty":"oct","k":"` + x + `"}`,
		"ec off curve":    `{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + x + `"}`,
		"ec P-384 label":  `{"kty":"EC","crv":"P-384","x":"` + x + `","y":"` + x + `"}`,
		"ed with upper D": `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","D":"` + x + `"}`,
	} {
		if _, err := keys.ParseJWKS([]byte(`{"keys":[` + jwk + `]}`)); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
		}
	}
}

// FuzzSignatureAgreesWithGoJose signs whatever header and payload bytes it is given, validly, with an
// Ed25519 or a P-256 key, and holds Verify's path to go-jose's: whatever verifySignature verifies,
// go-jose must parse and verify too, with the same payload. This covers what the rapid
// property cannot reach: headers and payloads other than the signer's, validly signed.
func FuzzSignatureAgreesWithGoJose(f *testing.F) {
	ed, _ := keys.Generate(keys.EdDSA)
	ec, _ := keys.Generate(keys.ES256)
	edK := privateKey(f, ed)
	ecK := privateKey(f, ec)
	for _, s := range []*keys.Signer{ed, ec} {
		f.Add(s.Algorithm() == keys.ES256, `{"alg":"`+string(s.Algorithm())+`","kid":"`+s.KeyID()+`","typ":"verdict+jwt"}`, []byte(`{"a":1}`))
		f.Add(s.Algorithm() == keys.ES256, ` { "typ" : "verdict+jwt" , "kid":"`+s.KeyID()+`","alg":"`+string(s.Algorithm())+"\"}\n", []byte(`x`))
		f.Add(s.Algorithm() == keys.ES256, `{"alg":"\u0045dDSA","kid":"\ud800","typ":"\/"}`, []byte{0xff})
	}
	f.Fuzz(func(t *testing.T, useEC bool, header string, payload []byte) {
		if len(payload) == 0 {
			return
		}
		s := ed
		if useEC {
			s = ec
		}
		var tok string
		// forge goes through string(payload): keep the bytes as given.
		input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString(payload)
		if useEC {
			h := sha256.Sum256([]byte(input))
			r, ss, _ := ecdsa.Sign(rand.Reader, ecK.(*ecdsa.PrivateKey), h[:])
			sig := make([]byte, 64)
			r.FillBytes(sig[:32])
			ss.FillBytes(sig[32:])
			tok = input + "." + b64.EncodeToString(sig)
		} else {
			tok = input + "." + b64.EncodeToString(ed25519.Sign(edK.(ed25519.PrivateKey), []byte(input)))
		}
		p, err := parseCompact(tok)
		if err != nil || p.header.alg != string(s.Algorithm()) {
			return
		}
		ours := verifySignature(s.Public().Key(), p.signed, p.sig)
		obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{s.Algorithm()})
		if ours && err != nil {
			t.Fatalf("ours verifies %q, go-jose refuses to parse: %v", tok, err)
		}
		if !ours {
			if err == nil {
				if _, verr := obj.Verify(s.Public().Key()); verr == nil {
					t.Fatalf("go-jose verifies %q, ours does not", tok)
				}
			}
			return
		}
		got, verr := obj.Verify(s.Public().Key())
		if verr != nil {
			t.Fatalf("ours verifies %q, go-jose does not: %v", tok, verr)
		}
		if string(got) != string(p.payload) {
			t.Fatalf("payload differs: go-jose %q, ours %q", got, p.payload)
		}
		var hm map[string]any
		if json.Unmarshal([]byte(header), &hm) == nil && obj.Signatures[0].Header.KeyID != p.header.kid {
			t.Fatalf("kid differs: go-jose %q, ours %q", obj.Signatures[0].Header.KeyID, p.header.kid)
		}
	})
}

// TestSignatureHeaderVariants: validly signed tokens whose headers are written every way JSON
// allows, and some it does not: whatever the strict parse takes and verifies, go-jose verifies.
func TestSignatureHeaderVariants(t *testing.T) {
	ed, _ := keys.Generate(keys.EdDSA)
	edK := privateKey(t, ed).(ed25519.PrivateKey)
	kid := ed.KeyID()
	for _, h := range []string{
		`{"alg":"EdDSA","kid":"` + kid + `","typ":"verdict+jwt"}`,
		"\t{\r\n\"alg\" :\"EdDSA\",\"kid\":\"" + kid + "\",\"typ\":\"verdict+jwt\"}\n ",
		`{"alg":"\u0045dDSA","kid":"` + kid + `","typ":"verdict\u002bjwt"}`,
		`{"alg":"EdDSA","kid":"\ud800","typ":"verdict+jwt"}`,
		`{"alg":"EdDSA","kid":"\udc00\ud800","typ":"verdict+jwt"}`,
		`{"alg":"EdDSA","kid":"\u0000","typ":"verdict+jwt"}`,
		`{"alg":"EdDSA","kid":"` + "\u2028\x7f" + `","typ":"verdict+jwt"}`,
		`{"alg":"EdDSA","kid":"` + strings.Repeat("k", 5000) + `","typ":"verdict+jwt"}`,
		`{"alg":"EdDSA","kid":"","typ":""}`,
		`{"alg":"EdDSA","kid":"a","typ":"b"}` + " \x00",
		"\ufeff" + `{"alg":"EdDSA","kid":"a","typ":"b"}`,
		`{"alg":"EdDSA","kid":"a","typ":"b",}`,
		`{"alg":"EdDSA","kid":"a","typ":"b"}{"alg":"EdDSA","kid":"a","typ":"b"}`,
		`{"alg":"EdDSA","kid":"a","typ":"b","alg":"EdDSA"}`,
	} {
		tok := forge(edK, h, `{"x":1}`)
		p, perr := parseCompact(tok)
		ours := perr == nil && p.header.alg == "EdDSA" && verifySignature(ed.Public().Key(), p.signed, p.sig)
		theirs := goJoseVerifies(tok, ed.Public())
		if ours && !theirs {
			t.Errorf("ours accepts what go-jose refuses: %q", h)
		}
	}
}

// TestSignatureOrderAroundPayload: the refusals around the payload's check keep the contract's
// order (alg, typ, the claims' shape, then the key and the signature), for verdicts and receipts.
func TestSignatureOrderAroundPayload(t *testing.T) {
	f := newFixture(t)
	edA := privateKey(t, f.a).(ed25519.PrivateKey)
	h := func(alg, typ string) string {
		return mustJSON(map[string]any{"alg": alg, "kid": f.a.KeyID(), "typ": typ})
	}
	for _, tt := range []struct {
		name string
		tok  string
		want Reason
	}{
		{"alg none, payload not UTF-8, no sig", forge(nil, h("none", TypeVerdict), "\xff"), AlgNotAllowed},
		{"typ wrong, payload not UTF-8", forge(edA, h("EdDSA", "JWT"), "\xff"), TypMismatch},
		{"typ wrong, payload not JSON, bad sig", forge(nil, h("EdDSA", "JWT"), "x"), TypMismatch},
		{"payload not UTF-8, bad sig", forge(nil, h("EdDSA", TypeVerdict), "\xff"), Malformed},
		{"claims malformed, unknown kid", forge(nil, strings.Replace(h("EdDSA", TypeVerdict), f.a.KeyID(), "nope", 1), "{}"), Malformed},
		{"receipt claims as verdict, signed", forge(edA, h("EdDSA", TypeVerdict), `{"iss":"x"}`), Malformed},
	} {
		if _, err := Verify(tt.tok, f.want); ReasonOf(err) != tt.want {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
		}
	}
	// Receipts run the same authenticate: an ES256-header receipt on an Ed key.
	ecK := privateKey(t, f.ec).(*ecdsa.PrivateKey)
	r := mustJSON(Receipt{Issuer: issuerA, ID: f.claims.ID, ActionKey: "a", Arguments: f.claims.Arguments, Decision: "executed", IssuedAt: f.now.Unix()})
	rh := mustJSON(map[string]any{"alg": "ES256", "kid": f.a.KeyID(), "typ": TypeReceipt})
	rw := ReceiptExpectation{Issuers: f.want.Issuers, Algorithms: []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256}, Now: f.want.Now}
	if _, err := VerifyReceipt(forge(ecK, rh, r), rw); ReasonOf(err) != AlgNotAllowed {
		t.Errorf("receipt alg confusion: %v", err)
	}
	rh = mustJSON(map[string]any{"alg": "ES256", "kid": f.ec.KeyID(), "typ": TypeReceipt})
	if _, err := VerifyReceipt(forge(ecK, rh, r), rw); err != nil {
		t.Errorf("valid ES256 receipt: %v", err)
	}
}
