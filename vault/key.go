package vault

import (
	"bytes"
	"fmt"
	"strings"

	"filippo.io/age"

	"github.com/verdictgate/verdict/internal/opfile"
	"github.com/verdictgate/verdict/keys"
)

// A Key is an age X25519 identity: its recipient (public half) encrypts the records the vault
// writes, the identity decrypts them. It prints as the file it came from, never as key material.
type Key struct {
	identity  *age.X25519Identity
	recipient *age.X25519Recipient
	source    string // the file it was read from, for messages
}

// maxKeyFile bounds the key file: an age-keygen file is three lines, under 200 bytes.
const maxKeyFile = 64 << 10

// LoadKey reads the age X25519 identity in the file at path: the file age-keygen writes, one
// AGE-SECRET-KEY-1… line, blank lines and lines starting with '#' (age-keygen's "created" and
// "public key" comments) ignored. Where the path comes from is the caller's: a systemd
// credential is $CREDENTIALS_DIRECTORY/<name>.
//
// The file is refused, by an error that names it, when it is missing or unreadable, when
// others could read or write it (keys.CheckPrivate: the owner alone, or the two group-read
// cases where the group is the daemon's alone, such as a systemd credential), when it holds no
// identity, more than one (which one encrypts would be a guess), or a line that is not an
// X25519 identity. No message quotes the file's content: a malformed line can still be most of
// a secret.
func LoadKey(path string) (*Key, error) {
	data, err := keys.ReadPrivate(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("vault: key file: %w", opfile.IfMissing(err, KeyHint(path)))
	}
	return parseKey(path, data)
}

// KeyHint says how to make the key file at path: age-keygen writes it mode 0600.
func KeyHint(path string) string {
	return fmt.Sprintf("make it with %q", "age-keygen -o "+path)
}

// parseKey reads the key file's content; source names the file in messages.
func parseKey(source string, data []byte) (*Key, error) {
	var (
		id   *age.X25519Identity
		line int // the identity's line
	)
	for n, raw := range bytes.Split(data, []byte("\n")) {
		// Trimming spaces forgives a CRLF file and an indented line; an identity has neither.
		text := strings.TrimSpace(string(raw))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		switch {
		case strings.HasPrefix(text, "AGE-SECRET-KEY-PQ-1"):
			return nil, fmt.Errorf("vault: key file %s line %d: a post-quantum hybrid identity; the vault takes an X25519 identity (age-keygen without -pq)", source, n+1)
		case strings.HasPrefix(text, "age1"):
			return nil, fmt.Errorf("vault: key file %s line %d: a recipient (a public key); the file must hold the identity, AGE-SECRET-KEY-1…", source, n+1)
		case !strings.HasPrefix(text, "AGE-SECRET-KEY-1"):
			return nil, fmt.Errorf("vault: key file %s line %d: not an age identity (want AGE-SECRET-KEY-1…, or a comment starting with '#')", source, n+1)
		}
		if id != nil {
			return nil, fmt.Errorf("vault: key file %s line %d: a second identity (the first is on line %d); give each key a file of its own", source, n+1, line)
		}
		parsed, err := age.ParseX25519Identity(text)
		if err != nil {
			// age's message says what is wrong (checksum, length) without the key's text.
			return nil, fmt.Errorf("vault: key file %s line %d: %v", source, n+1, err)
		}
		id, line = parsed, n+1
	}
	if id == nil {
		return nil, fmt.Errorf("vault: key file %s: no identity (want an AGE-SECRET-KEY-1… line; %s)", source, KeyHint(source))
	}
	return &Key{identity: id, recipient: id.Recipient(), source: source}, nil
}

// String names the key by the file it came from.
func (k *Key) String() string { return "vault key " + k.source }

// GoString is String: %#v must not print the identity's fields.
func (k *Key) GoString() string { return k.String() }
