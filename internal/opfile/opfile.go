// Package opfile opens the files an operator names — configs, policies, keys, CA bundles,
// token files, state files — so that an error about a relative path says where it led. A
// daemon started by a supervisor runs in a working directory the operator did not choose at
// the prompt, and "open keys/signing.jwk: no such file or directory" does not say which
// keys/ was meant.
package opfile

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// An Error is an *fs.PathError about a relative path, with the working directory it was
// resolved against. It unwraps to the *fs.PathError, so errors.Is(err, fs.ErrNotExist) and
// errors.As(err, **fs.PathError) hold as they do for the os package's own errors.
type Error struct {
	Dir string        // the working directory the path resolved against
	Err *fs.PathError // Err.Path is the path as given
}

// Error reads "open keys/signing.jwk (resolved against /srv/verdict as
// /srv/verdict/keys/signing.jwk): no such file or directory".
func (e *Error) Error() string {
	return e.Err.Op + " " + e.Err.Path + " (resolved against " + e.Dir + " as " + filepath.Join(e.Dir, e.Err.Path) +
		"): " + e.Err.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Explain returns err as an *Error when it is an *fs.PathError about a relative path, and
// unchanged otherwise (nil, another error, an absolute path, or a working directory that
// cannot be read).
func Explain(err error) error {
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok || pe != err || filepath.IsAbs(pe.Path) || pe.Path == "" {
		return err
	}
	dir, derr := os.Getwd()
	if derr != nil {
		return err
	}
	return &Error{Dir: dir, Err: pe}
}

// IfMissing adds hint, what to do, to err when err says a file does not exist:
// "open keys/signing.jwk (...): no such file or directory; make it with ...". Any other err is
// returned as it is.
func IfMissing(err error, hint string) error {
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("%w; %s", err, hint)
}

// Open is os.Open whose error says where a relative path resolved (see Explain).
func Open(path string) (*os.File, error) {
	f, err := os.Open(path) // nil on error
	return f, Explain(err)
}

// ReadFile is os.ReadFile whose error says where a relative path resolved (see Explain).
func ReadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, Explain(err)
	}
	return b, nil
}

// OpenFile is os.OpenFile whose error says where a relative path resolved (see Explain).
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag, perm) // nil on error
	return f, Explain(err)
}

// LoadX509KeyPair is tls.LoadX509KeyPair whose errors say where a relative path resolved (see
// Explain). A parse error names neither file's content.
func LoadX509KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}
