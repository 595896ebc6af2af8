package identity_test

import (
	"errors"
	"log"
	"net/http"

	"github.com/verdictgate/verdict/identity"
)

// A resource server branches on the reason of a refusal, never on its text.
func ExampleVerifier_Verify() {
	v, err := identity.NewVerifier(identity.Config{Issuers: []identity.Issuer{{
		Issuer:   "https://idp.example.com",
		Audience: "https://gateway.example.com/mcp",
	}}})
	if err != nil {
		log.Fatal(err)
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		token, err := identity.BearerToken(r)
		if err == nil {
			var p *identity.Principal
			if p, err = v.Verify(r.Context(), token); err == nil {
				log.Printf("call by %s", p.ID)
				return
			}
		}
		if errors.Is(err, identity.IdPUnavailable) {
			log.Printf("identity provider down: %v", err) // the details go to the log only
		}
		identity.WriteError(w, "https://gateway.example.com/.well-known/oauth-protected-resource/mcp", err)
	}
	_ = handler
}
