package keys

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"
)

// File names Keygen writes in its output directory.
const (
	PrivateKeyFile = "signing.jwk"
	JWKSFile       = "jwks.json"
)

// KeygenHint says how to make the private key file at path when it is missing: command is the
// binary (verdictd, executor) whose keygen subcommand makes that key. Keygen names the file
// signing.jwk, so a path of another name is told to point at the one it writes.
func KeygenHint(command, path string) string {
	dir := filepath.Dir(path)
	run := fmt.Sprintf("%q", command+" keygen --out "+dir)
	if filepath.Base(path) == PrivateKeyFile {
		return "make it with " + run + " (it writes " + path + " and, beside it, the public " + JWKSFile + ")"
	}
	return "make one with " + run + " and point this key at " + filepath.Join(dir, PrivateKeyFile) + ", the name keygen gives it"
}

// JWKSHint says where a public key set file comes from when it is missing: the jwks.json that
// command's keygen wrote beside the private key (command is the binary whose keys the set
// holds: verdictd, executor).
func JWKSHint(command string) string {
	return fmt.Sprintf("it is the %s that %q writes beside %s; copy it here, or give its URL", JWKSFile, command+" keygen --out DIR", PrivateKeyFile)
}

// Keygen generates a key for alg (EdDSA or ES256; empty means EdDSA) and writes dir/signing.jwk
// (the private JWK, mode 0600) and dir/jwks.json (the public set holding that one key). It
// creates dir (mode 0700) if needed and refuses to overwrite either file. It returns the kid.
func Keygen(dir string, alg jose.SignatureAlgorithm) (kid string, err error) {
	s, err := Generate(cmp.Or(alg, EdDSA))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("keys: keygen: %w", err)
	}
	privPath, jwksPath := filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, JWKSFile)
	// Check both before writing either, so a refusal leaves no half-written pair behind.
	for _, p := range []string{privPath, jwksPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", fmt.Errorf("keys: keygen: %s already exists; not overwriting it", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("keys: keygen: %w", err)
		}
	}
	if err := s.WritePrivateJWK(privPath); err != nil {
		return "", err
	}
	set, err := NewSet(s.Public())
	if err != nil {
		return "", err
	}
	pub, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return "", fmt.Errorf("keys: keygen: %w", err)
	}
	if err := writeNew(jwksPath, append(pub, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("keys: keygen: %w", err)
	}
	return s.KeyID(), nil
}

// WritePrivateJWK writes the private key to a new file at path with mode 0600. It never
// overwrites an existing file.
func (s *Signer) WritePrivateJWK(path string) error {
	data, err := s.MarshalPrivateJWK()
	if err != nil {
		return fmt.Errorf("keys: write private JWK: %w", err)
	}
	if err := writeNew(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("keys: write private JWK: %w", err)
	}
	return nil
}

// writeNew writes data to a new file at path: to a temporary file in the same directory first,
// synced, then hard-linked into place. The link fails if path exists, so nothing is overwritten,
// and a crash never leaves a truncated key at path.
func writeNew(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer func() {
		if cerr := tmp.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; not overwriting it", path)
		}
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
