package executor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/verdictgate/verdict/vault"
)

// unknownExpiry is how long a grant's access token whose expiry its authorization server did
// not say is taken to serve past the call's margin before the vault is read again: a token
// that no longer serves is the server's to refuse (the call fails, and the user connects
// again).
const unknownExpiry = time.Minute

// granter gives the accounts of one user_grant server their own grant's access token, from the
// vault. A principal without a grant, or whose grant cannot be used, is refused with the way to
// connect one; nothing else stands in for it.
type granter struct {
	id      string
	cfg     Credential
	vault   *vault.Vault
	connect string // the page where a user connects an account at the server
}

// loadVaultKeys loads the vault section's keys, none without one. A key file missing,
// unreadable, readable by others or malformed stops the executor.
func loadVaultKeys(v *VaultConfig) ([]*vault.Key, error) {
	if v == nil {
		return nil, nil
	}
	var ks []*vault.Key
	for i, f := range v.KeyFiles {
		k, err := vault.LoadKey(f)
		if err != nil {
			return nil, fmt.Errorf("vault.key_files[%d]: %w (%s)", i, err, vault.KeyHint(f))
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// openVault opens the grants kept in the executor's file with keys, and hands the vault to the
// user_grant servers' granters; nothing without keys.
func (s *Service) openVault(keys []*vault.Key) error {
	if len(keys) == 0 {
		return nil
	}
	var err error
	if s.vault, err = vault.New(s.db, keys, vault.Options{MaxPerPrincipal: s.cfg.Vault.MaxGrantsPerPrincipal, Now: s.now}); err != nil {
		return err
	}
	for _, x := range s.users {
		if g, ok := x.source.(*granter); ok {
			g.vault = s.vault
		}
	}
	return nil
}

// newGranter makes the granter of the user_grant entry cr of server id; openVault gives it the
// vault once the executor's file is open.
func (s *Service) newGranter(id string, cr Credential) (tokenSource, error) {
	return &granter{id: id, cfg: cr, connect: connectPage(s.cfg.Connect.PublicURL, id)}, nil
}

// connectPage is the page under base where a user connects an account at server.
func connectPage(base, server string) string {
	return strings.TrimSuffix(base, "/") + "/connect/" + url.PathEscape(server)
}

// fetch returns the access token of key's principal's grant for the server.
func (g *granter) fetch(ctx context.Context, key credKey, _ string, now time.Time, margin time.Duration) (string, time.Time, error) {
	gr, err := g.vault.Get(ctx, key.principal, g.id)
	switch {
	case errors.Is(err, vault.ErrNoGrant):
		return "", time.Time{}, g.connectAgain("no grant of the principal for the server",
			"the user has not connected an account at the tool's server; connect one at "+g.connect+" and send the verdict again; nothing was spent")
	case errors.Is(err, vault.ErrTampered), errors.Is(err, vault.ErrForeign):
		ce := g.connectAgain("the stored grant cannot be used: "+err.Error(),
			"the user's stored grant for the tool's server cannot be used; connect the account again at "+g.connect+"; nothing was spent")
		ce.tampered = true
		return "", time.Time{}, ce
	case err != nil:
		return "", time.Time{}, &credError{status: http.StatusServiceUnavailable, reason: ReasonCredentialUnavailable,
			msg: "the vault could not be read: " + err.Error(), user: "the user's grant for the tool's server could not be read now; nothing was spent, send it again"}
	}
	switch {
	case gr.Expiry.IsZero():
		return gr.AccessToken, now.Add(margin + unknownExpiry), nil
	case now.Add(margin).Before(gr.Expiry):
		return gr.AccessToken, gr.Expiry, nil
	}
	return "", time.Time{}, g.connectAgain("the grant's access token expires before the call could end",
		"the user's grant for the tool's server has expired; connect the account again at "+g.connect+"; nothing was spent")
}

// connectAgain is the refusal of a principal who must connect an account at the server first.
func (g *granter) connectAgain(why, words string) *credError {
	return &credError{status: http.StatusForbidden, reason: ReasonCredentialRequired, msg: why, user: words, connect: g.connect}
}
