package identity_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdictgate/verdict/identity"
	"github.com/verdictgate/verdict/internal/testing/testop"
)

func TestIntrospection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example OpenID Provider")
	}
	op := testop.Start(t, opCmd.Path(t), "-resource", resource,
		"-opaque-client", "svc:svc-secret", "-opaque-client", "elsewhere:elsewhere-secret="+otherResource,
		"-opaque-client", "both:both-secret="+resource+","+otherResource,
		"-introspector", "gateway:gateway-secret")
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	wrong := filepath.Join(dir, "wrong")
	if err := os.WriteFile(secret, []byte("gateway-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, []byte("not-the-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	issuer := func(secretFile string, excluded ...string) identity.Issuer {
		return identity.Issuer{Issuer: op.Issuer, Audience: resource, ExcludedAudiences: excluded, Introspection: &identity.Introspection{
			Endpoint: op.Metadata.IntrospectionEndpoint, ClientID: "gateway", ClientSecretFile: secretFile,
		}}
	}
	token := op.ClientCredentials(t, "svc", "svc-secret", "tools:read")
	issued := time.Now() // the provider's tokens live five minutes from about now

	for _, tc := range []struct {
		name     string
		secret   string
		excluded []string
		token    string
		now      time.Time
		want     identity.Reason
	}{
		{name: "active", secret: secret, token: token},
		{name: "unknown to the provider", secret: secret, token: "made-up-token", want: identity.TokenInactive},
		{name: "for another resource", secret: secret, token: op.ClientCredentials(t, "elsewhere", "elsewhere-secret"), want: identity.WrongAudience},
		{name: "for both, the other excluded", secret: secret, excluded: []string{otherResource},
			token: op.ClientCredentials(t, "both", "both-secret"), want: identity.WrongAudience},
		{name: "expired by this clock", secret: secret, token: token, now: issued.Add(time.Hour), want: identity.TokenExpired},
		{name: "introspection refuses the resource server", secret: wrong, token: token, want: identity.IdPUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = issued
			}
			v := verifier(t, issuer(tc.secret, tc.excluded...), identity.WithClock(func() time.Time { return now }))
			p, err := v.Verify(t.Context(), tc.token)
			if tc.want != "" {
				if p != nil || !errors.Is(err, tc.want) {
					t.Fatalf("Verify = %v, %v; want %s", p, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p.ID != op.Issuer+"#svc" || p.Method != identity.MethodIntrospection || !p.HasScope("tools:read") || p.Expiry.IsZero() {
				t.Errorf("principal %+v", *p)
			}
			if p.TokenHash == "" || p.TokenHash == "sha256:"+hex.EncodeToString(sha256.New().Sum(nil)) {
				t.Errorf("token hash %q", p.TokenHash)
			}
		})
	}

	op.Stop()
	v := verifier(t, issuer(secret))
	if p, err := v.Verify(t.Context(), token); p != nil || !errors.Is(err, identity.IdPUnavailable) {
		t.Fatalf("with the provider down: Verify = %v, %v; want idp_unavailable", p, err)
	}
}
