package vault

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/verdictgate/verdict/api"
)

// Kind says how a grant was obtained.
type Kind string

const (
	// KindUserGrant: the user consented at the upstream's authorization server (an
	// authorization code flow), and the tokens are the user's own.
	KindUserGrant Kind = "user_grant"
	// KindTokenExchange: the tokens came from exchanging the user's token at the upstream's
	// authorization server (RFC 8693).
	KindTokenExchange Kind = "token_exchange"
)

// A Grant is one principal's OAuth tokens for one upstream server.
//
// The tokens never leave through formatting: fmt (every verb, %#v included), log/slog,
// encoding/json and YAML encoders that honour MarshalYAML show or encode everything else, with
// "[redacted]" in place of each token. A Grant held in an unexported field of another struct is
// beyond the reach of its methods (fmt prints such fields by reflection): keep grants in
// variables and exported fields, and pass tokens on only where they are used.
type Grant struct {
	ID           string    // the vault's own id: random, not derived from the tokens
	Principal    string    // whose grant it is: the verdicts' principal
	Server       string    // the upstream server it is for
	Kind         Kind      // how it was obtained
	Subject      string    // the subject the tokens belong to at the upstream, when known
	Issuer       string    // the authorization server that issued the tokens, when known
	ClientID     string    // the client the tokens were issued to, when the grant has its own
	ClientSecret string    // secret; the secret of that client, when it has one
	AccessToken  string    // secret
	RefreshToken string    // secret; empty when the upstream issued none
	TokenType    string    // usually "Bearer"
	Expiry       time.Time // the access token's expiry; zero when unknown
	Scopes       []string  // the scopes granted
	Created      time.Time // when the grant was first stored
	Updated      time.Time // when it was last stored
}

// Info is what may be shown of g: everything but its tokens and its client's secret.
func (g Grant) Info() api.Grant {
	return api.Grant{
		ID: g.ID, Principal: g.Principal, Server: g.Server, Kind: string(g.Kind), Subject: g.Subject,
		Issuer: g.Issuer, ClientID: g.ClientID,
		TokenType: g.TokenType, Expiry: g.Expiry, Scopes: g.Scopes, HasRefreshToken: g.RefreshToken != "",
		Created: g.Created, Updated: g.Updated,
	}
}

// same reports whether g and o are the same grant in every field, times compared as instants:
// how PutIfUnchanged tells the grant it was given from the one stored.
func (g Grant) same(o Grant) bool {
	return g.ID == o.ID && g.Principal == o.Principal && g.Server == o.Server && g.Kind == o.Kind &&
		g.Subject == o.Subject && g.Issuer == o.Issuer && g.ClientID == o.ClientID && g.ClientSecret == o.ClientSecret &&
		g.AccessToken == o.AccessToken && g.RefreshToken == o.RefreshToken && g.TokenType == o.TokenType &&
		g.Expiry.Equal(o.Expiry) && slices.Equal(g.Scopes, o.Scopes) && g.Created.Equal(o.Created) && g.Updated.Equal(o.Updated)
}

// redacted stands for a token in every printed or encoded form of a Grant; absent marks a
// token the grant does not have, so that a log still tells the two apart.
const (
	redacted = "[redacted]"
	absent   = "[none]"
)

func mask(token string) string {
	if token == "" {
		return absent
	}
	return redacted
}

// String shows every field but the tokens.
func (g Grant) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "vault.Grant{id: %s, principal: %q, server: %q, kind: %s, subject: %q",
		g.ID, g.Principal, g.Server, string(g.Kind), g.Subject)
	if g.Issuer != "" {
		fmt.Fprintf(&b, ", issuer: %q", g.Issuer)
	}
	if g.ClientID != "" {
		fmt.Fprintf(&b, ", client_id: %q", g.ClientID)
	}
	if g.ClientSecret != "" {
		b.WriteString(", client_secret: " + redacted)
	}
	fmt.Fprintf(&b, ", access_token: %s, refresh_token: %s, token_type: %s, expiry: %s, scopes: [%s], created: %s, updated: %s}",
		mask(g.AccessToken), mask(g.RefreshToken), g.TokenType, formatTime(g.Expiry), strings.Join(g.Scopes, " "),
		formatTime(g.Created), formatTime(g.Updated))
	return b.String()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// GoString is the Go syntax of g with each token replaced by "[redacted]" (or "[none]").
func (g Grant) GoString() string {
	return fmt.Sprintf("vault.Grant{ID:%q, Principal:%q, Server:%q, Kind:%q, Subject:%q, Issuer:%q, ClientID:%q, ClientSecret:%q, "+
		"AccessToken:%q, RefreshToken:%q, TokenType:%q, Expiry:%#v, Scopes:%#v, Created:%#v, Updated:%#v}",
		g.ID, g.Principal, g.Server, g.Kind, g.Subject, g.Issuer, g.ClientID, mask(g.ClientSecret), mask(g.AccessToken), mask(g.RefreshToken), g.TokenType,
		g.Expiry, g.Scopes, g.Created, g.Updated)
}

// Format makes every verb print String (or GoString for %#v): without it, a verb String does
// not serve, such as %d or %t, would print the struct's fields, tokens included.
func (g Grant) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, g.GoString())
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), g.String())
}

// LogValue is g for log/slog: every field but the tokens.
func (g Grant) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", g.ID),
		slog.String("principal", g.Principal),
		slog.String("server", g.Server),
		slog.String("kind", string(g.Kind)),
		slog.String("subject", g.Subject),
		slog.String("issuer", g.Issuer),
		slog.String("client_id", g.ClientID),
		slog.String("client_secret", mask(g.ClientSecret)),
		slog.String("access_token", mask(g.AccessToken)),
		slog.String("refresh_token", mask(g.RefreshToken)),
		slog.String("token_type", g.TokenType),
		slog.Time("expiry", g.Expiry),
		slog.Any("scopes", g.Scopes),
		slog.Time("created", g.Created),
		slog.Time("updated", g.Updated),
	)
}

// MarshalJSON encodes g as its Info: no wire ever carries a grant's tokens. (The stored
// form is another type, inside the encryption.)
func (g Grant) MarshalJSON() ([]byte, error) { return json.Marshal(g.Info()) }

// MarshalYAML encodes g as its Info, for YAML encoders that ask (go.yaml.in/yaml/v3).
func (g Grant) MarshalYAML() (any, error) { return g.Info(), nil }

// Bounds of a grant's fields. The principal's and the server's are those of a preflight
// request (gates.CheckRequest): a grant is looked up by a verdict's principal and server.
const (
	maxPrincipal = 256
	maxServer    = 128
	maxSubject   = 1024
	maxToken     = 16 << 10 // a JWT access token with many claims stays well under this
	maxTokenType = 64
	maxScopes    = 256
	maxScope     = 256
)

// checkName refuses a principal or server the vault could not key by: empty, too long, not
// UTF-8, or holding a control character. NUL is the key's separator, and the other control
// characters have no place in a name that shows up in logs.
func checkName(what, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > limit:
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, what, len(s), limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%w: %s %q holds a control character at byte %d", ErrInvalid, what, s, i)
	}
	return nil
}

// checkToken refuses a token that is not 1*VSCHAR (RFC 6749 appendix A: %x20-7E): anything
// else would end up in an Authorization header. The message says where, never what: the
// token is a secret even when malformed.
func checkToken(what, s string, required bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > maxToken:
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, what, len(s), maxToken)
	}
	// A byte past ASCII reads as a rune past 0x7e where it starts, valid UTF-8 or not.
	if i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }); i >= 0 {
		return fmt.Errorf("%w: %s has a byte outside %%x20-7E at offset %d", ErrInvalid, what, i)
	}
	return nil
}

// checkScope refuses a scope that is not an RFC 6749 scope-token (%x21 / %x23-5B / %x5D-7E).
func checkScope(i int, s string) error {
	if s == "" || len(s) > maxScope {
		return fmt.Errorf("%w: scopes[%d] must be 1 to %d bytes", ErrInvalid, i, maxScope)
	}
	if j := strings.IndexFunc(s, func(c rune) bool { return c < 0x21 || c > 0x7e || c == '"' || c == '\\' }); j >= 0 {
		return fmt.Errorf("%w: scopes[%d] %q: byte %d is not allowed in a scope (RFC 6749 scope-token)", ErrInvalid, i, s, j)
	}
	return nil
}

// check applies the rules every stored grant satisfies. Put applies it to what it is given,
// and reading applies it again to what it decrypted, so nothing the rules refuse ever comes
// back as a grant.
func (g *Grant) check() error {
	if err := checkPair(g.Principal, g.Server); err != nil {
		return err
	}
	if !validID(g.ID) {
		// Not quoted: a misplaced token would be.
		return fmt.Errorf("%w: id (%d bytes) is not a vault grant id, g_ and 32 lowercase hex digits; leave it empty for a new grant", ErrInvalid, len(g.ID))
	}
	switch g.Kind {
	case KindUserGrant, KindTokenExchange:
	default:
		return fmt.Errorf("%w: kind %q: want %q or %q", ErrInvalid, g.Kind, KindUserGrant, KindTokenExchange)
	}
	for _, f := range []struct{ what, v string }{{"subject", g.Subject}, {"issuer", g.Issuer}, {"client id", g.ClientID}} {
		if len(f.v) > maxSubject || !utf8.ValidString(f.v) || strings.IndexFunc(f.v, unicode.IsControl) >= 0 {
			return fmt.Errorf("%w: %s must be UTF-8 without control characters, at most %d bytes", ErrInvalid, f.what, maxSubject)
		}
	}
	for _, t := range []struct {
		what, v  string
		required bool
	}{{"client secret", g.ClientSecret, false}, {"access token", g.AccessToken, true}, {"refresh token", g.RefreshToken, false}} {
		if err := checkToken(t.what, t.v, t.required); err != nil {
			return err
		}
	}
	if len(g.TokenType) > maxTokenType || strings.IndexFunc(g.TokenType, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return fmt.Errorf("%w: token type %q: at most %d visible ASCII characters", ErrInvalid, g.TokenType, maxTokenType)
	}
	if len(g.Scopes) > maxScopes {
		return fmt.Errorf("%w: %d scopes, at most %d", ErrInvalid, len(g.Scopes), maxScopes)
	}
	for i, s := range g.Scopes {
		if err := checkScope(i, s); err != nil {
			return err
		}
	}
	return nil
}

// validID reports whether id is of the form newID makes.
func validID(id string) bool {
	return len(id) == len(idPrefix)+32 && strings.HasPrefix(id, idPrefix) &&
		!strings.ContainsFunc(id[len(idPrefix):], func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'f') })
}
