package verdict

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/verdictgate/verdict/keys"
)

// A Receipt is the executor's signed account of what it did with a verdict. Times are Unix
// seconds.
type Receipt struct {
	Issuer    string `json:"iss"`      // executor id
	ID        string `json:"jti"`      // the verdict's id
	ActionKey string `json:"akey"`     //
	Arguments string `json:"args"`     // "sha256:<hex>" of the arguments sent
	Decision  string `json:"decision"` // executed | not_executed | failed | outcome_unknown
	IssuedAt  int64  `json:"iat"`      //
}

var decisions = []string{"executed", "not_executed", "failed", "outcome_unknown"}

// A ReceiptExpectation is what verdictd requires of a receipt.
type ReceiptExpectation struct {
	// Issuers are the trusted executors and their receipt keys.
	Issuers []TrustedIssuer
	// Algorithms allowed; nil means EdDSA only.
	Algorithms []jose.SignatureAlgorithm
	// Now is the clock; nil means time.Now. A receipt issued more than Skew in the future is
	// not_yet_valid.
	Now  func() time.Time
	Skew time.Duration
}

// SignReceipt signs r as an execution receipt with s.
func SignReceipt(s *keys.Signer, r Receipt) (string, error) {
	return sign(s, &r, TypeReceipt, "sign receipt")
}

// VerifyReceipt is VerifyReceiptContext with context.Background().
func VerifyReceipt(token string, want ReceiptExpectation) (*Receipt, error) {
	return VerifyReceiptContext(context.Background(), token, want)
}

// VerifyReceiptContext checks a receipt with the same machinery and order as VerifyContext, up to
// issuer_not_trusted, then refuses one issued in the future.
func VerifyReceiptContext(ctx context.Context, token string, want ReceiptExpectation) (*Receipt, error) {
	p, err := parse(token, TypeReceipt, want.Algorithms)
	if err != nil {
		return nil, err
	}
	r, err := decode[Receipt](p.payload)
	if err != nil {
		return nil, refuse(Malformed, fmt.Errorf("claims: %w", err))
	}
	if err := p.authenticate(ctx, r.Issuer, want.Issuers); err != nil {
		return nil, err
	}
	now := time.Now
	if want.Now != nil {
		now = want.Now
	}
	if t := now(); t.Before(time.Unix(r.IssuedAt, 0).Add(-max(want.Skew, 0))) {
		return nil, refuse(NotYetValid, fmt.Errorf("iat %d is in the future: now %d", r.IssuedAt, t.Unix()))
	}
	return r, nil
}

func (r *Receipt) validate() error {
	if r.Issuer == "" {
		return errors.New("iss is empty")
	}
	if r.ActionKey == "" {
		return errors.New("akey is empty")
	}
	if err := checkID(r.ID); err != nil {
		return fmt.Errorf("jti: %w", err)
	}
	if err := checkDigest(r.Arguments); err != nil {
		return fmt.Errorf("args: %w", err)
	}
	if !slices.Contains(decisions, r.Decision) {
		return fmt.Errorf("decision %q", r.Decision)
	}
	if r.IssuedAt <= 0 || r.IssuedAt > maxUnixSeconds {
		return fmt.Errorf("iat %d is out of range", r.IssuedAt)
	}
	return nil
}
