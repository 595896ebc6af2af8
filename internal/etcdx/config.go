package etcdx

import (
	"fmt"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/opfile"
)

// Defaults of a store's etcd keys, shared so that an executor and a verdictd given the same
// block address the same cluster in the same way.
const (
	DefaultPrefix         = "/verdict/"
	DefaultRequestTimeout = 2 * time.Second
)

// Config are the etcd keys of a config section that selects an etcd-backed store: the
// executor's nonce_store, verdictd's state_store and mcpgate's state. Each section embeds it, so
// its keys sit directly in the section beside the section's own (kind, and whatever only that
// store has), and one etcd block reads the same in every daemon.
type Config struct {
	// Endpoints are the cluster's client URLs (http://host:port, or https:// with tls).
	Endpoints []string `json:"endpoints,omitempty"`
	// Prefix is the deployment's key prefix; default DefaultPrefix. Each store keeps its keys
	// under its own name below it (Prefix + "nonce/", Prefix + "verdictd/", Prefix + "mcpgate/").
	Prefix string `json:"prefix,omitempty"`
	TLS    *TLS   `json:"tls,omitempty"`
	// Username and PasswordFile (a file holding the password) use etcd's own auth.
	Username     string `json:"username,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	// DialTimeout bounds getting an auth token at start; default DefaultDialTimeout.
	DialTimeout confx.Duration `json:"dial_timeout,omitempty"`
	// RequestTimeout bounds each request of the store; an etcd that does not answer within it
	// makes the store unavailable, and the daemon refuses. Default DefaultRequestTimeout.
	RequestTimeout confx.Duration `json:"request_timeout,omitempty"`
}

// Empty reports whether no key of c is set. A section whose kind is not etcd must have c
// empty: a misspelt kind must not leave a daemon on its local store while its operator believes
// it shares state through etcd.
func (c *Config) Empty() bool {
	return len(c.Endpoints) == 0 && c.Prefix == "" && c.TLS == nil && c.Username == "" && c.PasswordFile == "" &&
		c.DialTimeout == 0 && c.RequestTimeout == 0
}

// Validate reports every problem of c without connecting or reading files: the endpoint rules
// of CheckEndpoints and the pairs of CheckCredentialFiles, each named after section, the config
// key c sits under. store, when not empty, names the store in an endpoint problem as the store
// itself reports it when it opens ("<section>: <store>: etcd: ...").
func (c *Config) Validate(section, store string) []error {
	var errs []error
	if err := CheckEndpoints(c.Endpoints, c.TLS); err != nil {
		if store != "" {
			err = fmt.Errorf("%s: %w", store, err)
		}
		errs = append(errs, confx.Place(confx.Key(section, "endpoints"), fmt.Errorf("%s: %w", section, err)))
	}
	return append(errs, CheckCredentialFiles(section, c.Username, c.PasswordFile, c.TLS)...)
}

// ReadPassword reads the etcd user's password from PasswordFile ("" without one), named after
// section. A trailing line end is not part of the password; an empty password is refused, since
// it would fail authentication with a less helpful error only once etcd is reached.
func (c *Config) ReadPassword(section string) (string, error) {
	if c.PasswordFile == "" {
		return "", nil
	}
	b, err := opfile.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("%s.password_file: %w", section, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("%s.password_file %s is empty", section, c.PasswordFile)
	}
	return pw, nil
}
