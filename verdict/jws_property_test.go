package verdict

import (
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/keys"
)

// TestSignatureAgreesWithGoJose holds verifySignature to go-jose's own verification, which it
// stands in for: on tokens go-jose signed, of either algorithm, then left alone, cut, or with
// any byte changed, and checked against the signing key or another, whatever parseCompact takes
// is verified by one exactly when it is by the other.
func TestSignatureAgreesWithGoJose(t *testing.T) {
	var signers []*keys.Signer
	for _, alg := range []jose.SignatureAlgorithm{keys.EdDSA, keys.ES256, keys.EdDSA, keys.ES256} {
		s, err := keys.Generate(alg)
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, s)
	}
	rapid.Check(t, func(t *rapid.T) {
		signer := rapid.SampledFrom(signers).Draw(t, "signer")
		payload := rapid.SliceOfN(rapid.Byte(), 1, 512).Draw(t, "payload")
		tok, err := signer.SignCompact(payload, TypeVerdict)
		if err != nil {
			t.Fatal(err)
		}
		change := rapid.IntRange(0, 2).Draw(t, "change")
		switch change {
		case 1: // one byte anywhere set to any base64url character, or a dot
			b := []byte(tok)
			i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
			b[i] = rapid.SampledFrom([]byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")).Draw(t, "to")
			tok = string(b)
		case 2: // cut short
			tok = tok[:rapid.IntRange(0, len(tok)-1).Draw(t, "cut")]
		}
		key := rapid.SampledFrom(signers).Draw(t, "key").Public()
		p, err := parseCompact(tok)
		if err != nil || p.header.alg != string(key.Algorithm()) {
			return // refused before any signature is checked, or by the alg check
		}
		ours := verifySignature(key.Key(), p.signed, p.sig)
		obj, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{key.Algorithm()})
		theirs := err == nil && func() bool { _, err := obj.Verify(key.Key()); return err == nil }()
		if ours != theirs {
			t.Fatalf("token %q with key %s: verifySignature %v, go-jose %v", tok, key.KeyID(), ours, theirs)
		}
		if change == 0 && key.KeyID() == signer.KeyID() && !ours {
			t.Fatalf("the signer's own token %q does not verify", tok)
		}
	})
}
