package vault

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"filippo.io/age"
	jsonv2 "github.com/go-json-experiment/json"
)

// record is the stored form of a grant: the JSON that age encrypts. It carries the principal
// and server its bbolt key names, so that a record moved or copied to another key is told
// apart from the one written there (age has no associated data to bind the key with), and the
// grant's id. It is the only type that encodes tokens.
type record struct {
	V            int       `json:"v"`
	ID           string    `json:"id"`
	Principal    string    `json:"principal"`
	Server       string    `json:"server"`
	Kind         Kind      `json:"kind"`
	Subject      string    `json:"subject,omitempty"`
	Issuer       string    `json:"issuer,omitempty"`
	ClientID     string    `json:"client_id,omitempty"`
	ClientSecret string    `json:"client_secret,omitempty"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
}

// recordVersion is the stored JSON's version; a record of another is refused as tampered
// rather than guessed at.
const recordVersion = 1

// maxRecord bounds a record's plaintext: a grant within the field bounds stays far below it,
// and reading stops past it whatever the ciphertext claims.
const maxRecord = 256 << 10

const idPrefix = "g_"

// newID is a fresh grant id: 128 random bits, so it says nothing of the tokens and cannot be
// guessed.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return idPrefix + hex.EncodeToString(b[:])
}

// seal encrypts g to recipient. g has passed check.
func seal(g Grant, recipient age.Recipient) ([]byte, error) {
	plain, err := jsonv2.Marshal(record{
		V: recordVersion, ID: g.ID, Principal: g.Principal, Server: g.Server, Kind: g.Kind, Subject: g.Subject,
		Issuer: g.Issuer, ClientID: g.ClientID, ClientSecret: g.ClientSecret, AccessToken: g.AccessToken, RefreshToken: g.RefreshToken, TokenType: g.TokenType, Expiry: g.Expiry,
		Scopes: g.Scopes, Created: g.Created, Updated: g.Updated,
	})
	if err != nil {
		return nil, fmt.Errorf("vault: encode grant: %w", err)
	}
	if len(plain) > maxRecord {
		return nil, fmt.Errorf("%w: the grant encodes to %d bytes, at most %d", ErrInvalid, len(plain), maxRecord)
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, recipient)
	if err != nil {
		return nil, fmt.Errorf("vault: encrypt: %w", err)
	}
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("vault: encrypt: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("vault: encrypt: %w", err)
	}
	return out.Bytes(), nil
}

// openRecord decrypts and decodes the value stored under (principal, server). It returns a
// grant only when the value decrypts under one of identities, authenticates in full, decodes
// strictly to a record of this version whose grant passes check, and names that same principal
// and server; otherwise an error matching ErrTampered (or ErrForeign for a sound record stored
// under another key). Errors say which record, never what it holds.
func openRecord(identities []age.Identity, principal, server string, value []byte) (Grant, error) {
	r, err := age.Decrypt(bytes.NewReader(value), identities...)
	if err != nil {
		return Grant{}, fmt.Errorf("%w: grant of %q at %q: %v", ErrTampered, principal, server, err)
	}
	// ReadAll reaches the stream's end, where age checks the last chunk and that nothing
	// follows it: a truncated or extended record fails here.
	plain, err := io.ReadAll(io.LimitReader(r, maxRecord+1))
	if err != nil {
		return Grant{}, fmt.Errorf("%w: grant of %q at %q: %v", ErrTampered, principal, server, err)
	}
	if len(plain) > maxRecord {
		return Grant{}, fmt.Errorf("%w: grant of %q at %q: more than %d bytes", ErrTampered, principal, server, maxRecord)
	}
	var rec record
	if err := jsonv2.Unmarshal(plain, &rec, jsonv2.RejectUnknownMembers(true)); err != nil {
		// The decoder's message could quote a token; only the fact is reported.
		return Grant{}, fmt.Errorf("%w: grant of %q at %q: decrypts, but is not a grant record", ErrTampered, principal, server)
	}
	if rec.V != recordVersion {
		return Grant{}, fmt.Errorf("%w: grant of %q at %q: record version %d, want %d", ErrTampered, principal, server, rec.V, recordVersion)
	}
	g := Grant{
		ID: rec.ID, Principal: rec.Principal, Server: rec.Server, Kind: rec.Kind, Subject: rec.Subject,
		Issuer: rec.Issuer, ClientID: rec.ClientID, ClientSecret: rec.ClientSecret, AccessToken: rec.AccessToken, RefreshToken: rec.RefreshToken, TokenType: rec.TokenType,
		Expiry: rec.Expiry, Scopes: rec.Scopes, Created: rec.Created, Updated: rec.Updated,
	}
	if err := g.check(); err != nil {
		return Grant{}, fmt.Errorf("%w: grant of %q at %q: decrypts, but breaks the vault's rules: %v", ErrTampered, principal, server, err)
	}
	if g.Principal != principal || g.Server != server {
		return Grant{}, fmt.Errorf("%w: the record stored for %q at %q is the grant of %q at %q", ErrForeign, principal, server, g.Principal, g.Server)
	}
	return g, nil
}
