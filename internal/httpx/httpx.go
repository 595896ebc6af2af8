// Package httpx owns the HTTP hygiene both daemons share: bearer-token callers compared by hash in
// constant time, bounded and strict JSON request bodies, the contract's error envelope, and the
// TLS / mTLS server configuration.
package httpx

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/opfile"
)

// Error codes every endpoint may answer with, the transport's own; it answers with four of
// package api's too (api.CodeUnauthorized, CodeUnknownField, CodeNotFound, CodeInvalidRequest),
// which a daemon's handler answers with as well.
const (
	CodeForbidden       = "forbidden"
	CodeBodyTooLarge    = "body_too_large"
	CodeMalformedJSON   = "malformed_json"
	CodeDuplicateKey    = "duplicate_key"
	CodeWrongType       = "wrong_type"
	CodeMethod          = "method_not_allowed"
	CodeInternal        = "internal"
	CodeUnavailable     = "unavailable"
	CodeUnsupportedType = "unsupported_media_type"
)

// Error is an API error: the HTTP status and the contract's {"error": {"code", "message"}} body.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// WriteJSON writes v with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes err as the contract's error envelope. Errors that are not *Error become a
// 500 whose message says nothing about internals.
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	WriteJSON(w, e.Status, api.ErrorBody{Error: api.ErrorDetail{Code: e.Code, Message: e.Message}})
}

// Token is a caller credential as configured: a name and the hex SHA-256 of its bearer token.
type Token struct {
	Name        string `json:"name"`
	TokenSHA256 string `json:"token_sha256"`
}

// Tokens checks bearer tokens against configured hashes. Hashing first makes every comparison
// the same length, so the compare is constant-time whatever the caller sends.
type Tokens struct {
	names  []string
	hashes [][sha256.Size]byte
}

// NewTokens validates the configured hashes.
func NewTokens(list []Token) (*Tokens, error) {
	t := &Tokens{}
	for i, c := range list {
		h, err := ParseSHA256(c.TokenSHA256)
		if err != nil {
			return nil, fmt.Errorf("callers[%d] (%s): %w", i, c.Name, err)
		}
		t.names = append(t.names, c.Name)
		t.hashes = append(t.hashes, h)
	}
	return t, nil
}

// ParseSHA256 parses a 64-hex-digit SHA-256 value.
func ParseSHA256(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != sha256.Size {
		return h, fmt.Errorf("token_sha256 must be 64 hex digits")
	}
	copy(h[:], b)
	return h, nil
}

// HashToken returns the hex SHA-256 of a token, the form configs store.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Why a request's bearer token was refused. A caller without a token and one with a wrong token
// need different fixes, so they are told apart.
var (
	ErrNoToken          = errors.New("no bearer token")
	ErrTokenNotAccepted = errors.New("bearer token not accepted")
)

// Check returns the caller name for the request's bearer token, or ErrNoToken when there is
// none, or ErrTokenNotAccepted when it is none of t's. Every configured hash is compared so the
// time taken does not depend on which one matched. A nil set accepts no token.
func (t *Tokens) Check(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok {
		return "", ErrNoToken
	}
	if t == nil {
		return "", ErrTokenNotAccepted
	}
	got := sha256.Sum256([]byte(tok))
	name, found := "", 0
	for i, h := range t.hashes {
		if subtle.ConstantTimeCompare(got[:], h[:]) == 1 {
			name, found = t.names[i], 1
		}
	}
	if found != 1 {
		return "", ErrTokenNotAccepted
	}
	return name, nil
}

// Match returns the caller name for the request's bearer token, and whether it is one of t's.
func (t *Tokens) Match(r *http.Request) (string, bool) {
	name, err := t.Check(r)
	return name, err == nil
}

// Require reports true if the request carries one of t's tokens. Otherwise it answers 401 with a
// Bearer challenge for realm and reports false: the message is missing when the request has no
// bearer token, and rejected when its token is not one of t's (the challenge then carries RFC
// 6750's invalid_token). A nil set lets nobody in.
func (t *Tokens) Require(w http.ResponseWriter, r *http.Request, realm, missing, rejected string) bool {
	_, ok := t.RequireCaller(w, r, realm, missing, rejected)
	return ok
}

// RequireCaller is Require that also returns the name of the caller whose token the request
// carries.
func (t *Tokens) RequireCaller(w http.ResponseWriter, r *http.Request, realm, missing, rejected string) (string, bool) {
	name, err := t.Check(r)
	switch {
	case err == nil:
		return name, true
	case errors.Is(err, ErrTokenNotAccepted):
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`", error="invalid_token"`)
		WriteError(w, Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%s", rejected))
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
		WriteError(w, Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%s", missing))
	}
	return "", false
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return h[len(p):], true
}

// ReadBody reads at most limit bytes of the request body; a longer body is a 413.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") &&
		!strings.HasPrefix(strings.ToLower(ct), "application/jose") {
		return nil, Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "content type %q is not accepted", ct)
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, Errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "request body exceeds %d bytes", limit)
		}
		return nil, Errorf(http.StatusBadRequest, CodeMalformedJSON, "read body: %v", err)
	}
	return body, nil
}

// readAll is io.ReadAll with the buffer sized from the declared length (when it is within
// limit), so that a body is read without growing and copying its buffer several times. The
// declared length is only a hint: the reader enforces the limit.
func readAll(r io.Reader, declared, limit int64) ([]byte, error) {
	size := int64(512)
	if declared > 0 && declared <= limit {
		size = declared + 1 // room for the read that reports EOF
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// DecodeStrict decodes one JSON value into v with jsonv2 (encoding/json/v2), whose defaults refuse
// duplicate member names, names that match a field only up to case, invalid UTF-8 and trailing
// data; unknown members are refused too. The errors are *Error values a handler can write as
// they are.
func DecodeStrict(data []byte, v any) error {
	if err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return JSONError(err)
	}
	return nil
}

// JSONError maps an error of jsonv2 (encoding/json/v2) to an API error with a precise code, by the
// error's type and the sentinel it wraps.
func JSONError(err error) *Error {
	var synErr *jsontext.SyntacticError
	switch {
	case errors.Is(err, jsonv2.ErrUnknownName):
		return Errorf(http.StatusBadRequest, api.CodeUnknownField, "%v", err)
	case errors.Is(err, jsontext.ErrDuplicateName):
		return Errorf(http.StatusBadRequest, CodeDuplicateKey, "%v", err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, CodeMalformedJSON, "empty or truncated JSON body")
	case errors.As(err, &synErr):
		return Errorf(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON at byte %d: %v", synErr.ByteOffset, err)
	case errors.As(err, new(*jsonv2.SemanticError)):
		return Errorf(http.StatusBadRequest, CodeWrongType, "%v", err)
	default:
		return Errorf(http.StatusBadRequest, CodeMalformedJSON, "%v", err)
	}
}

// TLS is the contract's tls config block.
type TLS struct {
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	ClientCA string `json:"client_ca,omitempty"`
}

// Config returns the server TLS configuration, or nil when TLS is not configured. With client_ca
// set, every client must present a certificate that chains to it.
func (t *TLS) Config() (*tls.Config, error) {
	if t == nil || (t.Cert == "" && t.Key == "") {
		return nil, nil
	}
	cert, err := opfile.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: load key pair: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCA != "" {
		pem, err := opfile.ReadFile(t.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls: read client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client_ca %s holds no PEM certificate", t.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// NewServeMux returns a ServeMux whose "/" pattern answers what no other pattern takes, an
// unknown path or a method its path is not served for, with the error envelope: 404
// not_found, as the API documents, rather than ServeMux's plain-text 404 or 405, which a
// client reading the envelope could not tell from a proxy's page.
func NewServeMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", NotFound)
	return mux
}

// NotFound answers 404 not_found in the error envelope.
func NotFound(w http.ResponseWriter, _ *http.Request) {
	WriteError(w, Errorf(http.StatusNotFound, api.CodeNotFound, "no such endpoint"))
}

// WriteReadiness answers a /readyz probe: 200 {"status": "ready"} when ready, else 503
// {"status": "not_ready", "problems": [...]} ("not ready" when none is given), each with the
// daemon's own members (extra) and "unlisted_servers" when a tool server's listing is not
// served now. Anyone may ask, so problems name servers and durations only, never an error
// that could quote a credential.
func WriteReadiness(w http.ResponseWriter, ready bool, problems, unlisted []string, extra map[string]any) {
	body := map[string]any{"status": "ready"}
	status := http.StatusOK
	if !ready {
		if len(problems) == 0 {
			problems = []string{"not ready"}
		}
		body = map[string]any{"status": "not_ready", "problems": problems}
		status = http.StatusServiceUnavailable
	}
	maps.Copy(body, extra)
	if len(unlisted) > 0 {
		body["unlisted_servers"] = unlisted
	}
	WriteJSON(w, status, body)
}
