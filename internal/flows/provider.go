package flows

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ErrProvider: the OpenID Provider could not be discovered.
var ErrProvider = errors.New("the OpenID Provider is unavailable")

// A Provider is a daemon's client at an OpenID Provider for a browser sign-in, discovered on
// first use and kept once discovered: a provider that is down when the daemon starts delays
// sign-ins, not the daemon. A client without a secret is public (PKCE alone, its id in the
// token request's body). It is safe for concurrent use.
type Provider struct {
	Issuer, ClientID, Secret string
	RedirectURL              string
	Scopes                   []string // asked beside openid
	Client                   *http.Client

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// Get returns the OAuth config of the code flow and the verifier of the provider's ID tokens
// for the client.
func (p *Provider) Get(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.oauth != nil {
		return p.oauth, p.verifier, nil
	}
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, p.Client), p.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: discovery of %s: %v", ErrProvider, p.Issuer, err)
	}
	ep := op.Endpoint()
	if p.Secret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams // a public client: client_id in the body, no secret
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, s := range p.Scopes {
		if s != oidc.ScopeOpenID {
			scopes = append(scopes, s)
		}
	}
	p.oauth = &oauth2.Config{ClientID: p.ClientID, ClientSecret: p.Secret, Endpoint: ep, RedirectURL: p.RedirectURL, Scopes: scopes}
	p.verifier = op.Verifier(&oidc.Config{ClientID: p.ClientID})
	return p.oauth, p.verifier, nil
}

// Check discovers the provider afresh, whether or not Get has discovered it before, and keeps
// nothing of it: a readiness probe asks whether the provider answers now, which a discovery
// kept from an earlier sign-in cannot say.
func (p *Provider) Check(ctx context.Context) error {
	if _, err := oidc.NewProvider(oidc.ClientContext(ctx, p.Client), p.Issuer); err != nil {
		return fmt.Errorf("%w: discovery of %s: %v", ErrProvider, p.Issuer, err)
	}
	return nil
}
