package executor

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/confx"
	"github.com/verdictgate/verdict/internal/loopback"
)

// VaultConfig is the vault section: where the users' grants of the user_grant servers are
// kept, encrypted (package vault, docs/credentials.md#the-vault).
type VaultConfig struct {
	// KeyFiles are age identity files: the first encrypts every grant written, and every one
	// decrypts (older keys, while a rotation re-encrypts what they wrote).
	KeyFiles []string `json:"key_files"`
	// MaxGrantsPerPrincipal bounds the grants one principal holds; 0 is the vault's default.
	MaxGrantsPerPrincipal int `json:"max_grants_per_principal,omitempty"`
	// Store is where the grants are: where the nonce store is when unset, and if set it must
	// say the same (vaultStore). With nonce_store.kind etcd they are in that cluster, under the
	// same prefix and through the same connection keys, so that every executor sharing the
	// nonces shares the grants too: a grant connected at one is used, refreshed and revoked
	// at all of them.
	Store string `json:"store,omitempty"`
}

// vaultStore is where the vault keeps the grants: the nonce store's kind, bbolt or etcd.
func (c *Config) vaultStore() string {
	if c.NonceStore.Kind == NonceStoreEtcd {
		return NonceStoreEtcd
	}
	return NonceStoreBolt
}

// Connect is the connect section: the executor's pages where a user connects an account at a
// user_grant server, signed in at the organisation's identity provider first so that the
// grant is stored for the user who gave it (docs/credentials.md#connecting-an-account).
type Connect struct {
	// PublicURL is where browsers reach the executor: the pages are under PublicURL/connect/,
	// and the redirect URIs the providers send the browser back to are
	// PublicURL/connect/signed-in (the sign-in) and PublicURL/connect/callback (a grant).
	PublicURL string `json:"public_url"`
	// SignIn is the executor's client at the identity provider for the sign-in.
	SignIn SignIn `json:"sign_in"`
}

// SignIn is an OpenID Connect client: the executor's, at an issuer of the identity section.
type SignIn struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
	// ClientSecretFile holds the client's secret; none makes it a public client (PKCE alone).
	ClientSecretFile string `json:"client_secret_file,omitempty"`
}

// maxGrantsPerPrincipal bounds the vault section's max_grants_per_principal.
const maxGrantsPerPrincipal = 1024

// userGrants reports whether any server is called with user grants.
func (c *Config) userGrants() bool {
	for _, cr := range c.Credentials {
		if cr.Mode == api.CredentialUserGrant {
			return true
		}
	}
	return false
}

// validateConnect reports the problems of the vault and connect sections, each at its key. Both
// serve the user_grant servers alone, and either without one names nothing.
func (c *Config) validateConnect() []error {
	var errs []error
	uses := c.userGrants()
	if v := c.Vault; v != nil {
		if !uses {
			errs = append(errs, confx.Place("vault", errors.New("vault: no server is called with mode user_grant: the vault would keep nothing")))
		}
		if len(v.KeyFiles) == 0 {
			errs = append(errs, confx.Errorf(confx.Key("vault", "key_files"), "at least one key file is required (age-keygen -o FILE)"))
		}
		for i, f := range v.KeyFiles {
			if strings.TrimSpace(f) == "" {
				errs = append(errs, confx.Errorf(confx.Index(confx.Key("vault", "key_files"), i), "is empty"))
			}
		}
		if n := v.MaxGrantsPerPrincipal; n < 0 || n > maxGrantsPerPrincipal {
			errs = append(errs, confx.Errorf(confx.Key("vault", "max_grants_per_principal"), "%d: want 1 to %d (0: the default, 32)", n, maxGrantsPerPrincipal))
		}
		// The grants are where the nonces are: executors that share one but not the other
		// would each use, refresh and revoke grants of their own.
		switch at := confx.Key("vault", "store"); {
		case v.Store == "" || v.Store == c.vaultStore():
		case v.Store == NonceStoreBolt:
			errs = append(errs, confx.Errorf(at, "bbolt with nonce_store.kind etcd: each executor sharing the nonces would keep grants of its own, "+
				"and a grant revoked at one would still be used at the others; leave store unset (the vault is in the nonce store's etcd)"))
		case v.Store == NonceStoreEtcd:
			errs = append(errs, confx.Errorf(at, "etcd needs nonce_store.kind etcd: the vault is kept in the nonce store's cluster, through its connection keys"))
		default:
			errs = append(errs, confx.Errorf(at, "%q: want bbolt or etcd (unset: where nonce_store is)", v.Store))
		}
	}
	cn := c.Connect
	if cn == nil {
		return errs
	}
	if !uses {
		errs = append(errs, confx.Place("connect", errors.New("connect: no server is called with mode user_grant: there is no account to connect")))
	}
	if err := checkPublicURL(cn.PublicURL); err != nil {
		errs = append(errs, confx.Errorf(confx.Key("connect", "public_url"), "%v", err))
	}
	at := confx.Key("connect", "sign_in")
	switch {
	case cn.SignIn.Issuer == "":
		errs = append(errs, confx.Errorf(confx.Key(at, "issuer"), "is required: the issuer of the identity section the users sign in at"))
	case c.Identity == nil || !slices.ContainsFunc(c.Identity.Issuers, func(is identity.Issuer) bool { return is.Issuer == cn.SignIn.Issuer }):
		// The principal a grant is stored for is named as verdictd names it: by that issuer's
		// principal claim, which only the identity section says.
		errs = append(errs, confx.Errorf(confx.Key(at, "issuer"), "%q is not an issuer of the identity section", cn.SignIn.Issuer))
	}
	if cn.SignIn.ClientID == "" {
		errs = append(errs, confx.Errorf(confx.Key(at, "client_id"), "is required: the executor's client at the identity provider"))
	}
	return errs
}

// checkPublicURL accepts the connect pages' base URL: https, or http on a loopback host
// (loopback.SecureURL), with no query; a path is a prefix the pages are under.
func checkPublicURL(s string) error {
	if s == "" {
		return errors.New("is required: where browsers reach the executor's connect pages")
	}
	if err := secureFor(loopback.SecureURL(s), "the codes of the users' grants and sign-ins are sent there"); err != nil {
		return err
	}
	if u, _ := url.Parse(s); u.RawQuery != "" || u.ForceQuery {
		return fmt.Errorf("%q has a query: want the base URL the connect pages are under", s)
	}
	return nil
}
