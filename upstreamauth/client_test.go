package upstreamauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/oauth2"
)

// serverAt is the metadata of a crafted authorization server at base.
func serverAt(base string) *Server {
	return &Server{
		Issuer: base, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token",
		RegistrationEndpoint: base + "/register", RevocationEndpoint: base + "/revoke",
		CodeChallengeMethodsSupported: []string{"S256"},
	}
}

// TestRegisterAnswers: a registration answer that is not the client asked for is refused, and
// the refusal quotes nothing of the answer, which holds the secret.
func TestRegisterAnswers(t *testing.T) {
	const redirect = "http://127.0.0.1:9/callback"
	const secret = "registered-secret-d8c1f0"
	for _, tc := range []struct {
		name   string
		method string
		answer document
		want   error
		code   string
		client Client
	}{
		{"public", "", document{status: 201, body: `{"client_id":"c1","redirect_uris":["` + redirect + `"],"token_endpoint_auth_method":"none"}`}, nil, "",
			Client{ID: "c1", AuthStyle: oauth2.AuthStyleInParams}},
		{"a 200 with nothing but the ID", "", document{body: `{"client_id":"c1"}`}, nil, "", Client{ID: "c1", AuthStyle: oauth2.AuthStyleInParams}},
		{"post with an expiring secret", AuthMethodPost, document{status: 201, body: `{"client_id":"c1","client_secret":"` + secret + `","client_secret_expires_at":2000000000,"token_endpoint_auth_method":"client_secret_post"}`}, nil, "",
			Client{ID: "c1", Secret: secret, AuthStyle: oauth2.AuthStyleInParams, SecretExpiry: time.Unix(2000000000, 0)}},
		{"basic", AuthMethodBasic, document{status: 201, body: `{"client_id":"c1","client_secret":"` + secret + `","client_secret_expires_at":0}`}, nil, "",
			Client{ID: "c1", Secret: secret, AuthStyle: oauth2.AuthStyleInHeader}},

		{"no client_id", "", document{status: 201, body: `{"client_secret":"` + secret + `"}`}, ErrAnswer, "", Client{}},
		{"a client_id with a space", "", document{status: 201, body: `{"client_id":"c 1"}`}, ErrAnswer, "", Client{}},
		{"a secret for a public client", "", document{status: 201, body: `{"client_id":"c1","client_secret":"` + secret + `"}`}, ErrAnswer, "", Client{}},
		{"no secret for basic", AuthMethodBasic, document{status: 201, body: `{"client_id":"c1"}`}, ErrAnswer, "", Client{}},
		{"another method", AuthMethodBasic, document{status: 201, body: `{"client_id":"c1","client_secret":"` + secret + `","token_endpoint_auth_method":"client_secret_post"}`}, ErrAnswer, "", Client{}},
		{"other redirect URIs", "", document{status: 201, body: `{"client_id":"c1","redirect_uris":["https://evil.example.com/cb"]}`}, ErrAnswer, "", Client{}},
		{"no code grant", "", document{status: 201, body: `{"client_id":"c1","grant_types":["client_credentials"]}`}, ErrAnswer, "", Client{}},
		{"an expiry before 1970", AuthMethodBasic, document{status: 201, body: `{"client_id":"c1","client_secret":"` + secret + `","client_secret_expires_at":-1}`}, ErrAnswer, "", Client{}},
		{"client_id twice", "", document{status: 201, body: `{"client_id":"c1","client_id":"c2"}`}, ErrAnswer, "", Client{}},
		{"not JSON", "", document{status: 201, ctype: "text/plain", body: `{"client_id":"c1"}`}, ErrAnswer, "", Client{}},
		{"a redirect", "", document{status: 307, header: map[string]string{"Location": "{base}/elsewhere"}}, ErrAnswer, "", Client{}},
		{"a 500 page", "", document{status: 500, ctype: "text/html", body: "oops " + secret}, ErrAnswer, "", Client{}},
		{"refused", "", document{status: 400, body: `{"error":"invalid_redirect_uri","error_description":"no"}`}, nil, "invalid_redirect_uri", Client{}},
		{"too long", "", document{status: 201, body: `{"client_id":"c1","x":"` + strings.Repeat("x", maxDocument) + `"}`}, ErrAnswer, "", Client{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDocServer(t, false, map[string]document{"/register": tc.answer, "/elsewhere": {status: 201, body: `{"client_id":"c1"}`}})
			c, err := Register(t.Context(), nil, serverAt(d.URL), RegistrationRequest{ClientName: "x", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: tc.method})
			switch {
			case tc.want == nil && tc.code == "":
				if err != nil || c != tc.client {
					t.Errorf("Register = %v, %v; want %v", c, err, tc.client)
				}
				return
			case tc.code != "":
				if !isOAuth(err, EndpointRegistration, tc.code) {
					t.Errorf("Register: %v, want the registration endpoint's %s", err, tc.code)
				}
			case !errors.Is(err, tc.want):
				t.Errorf("Register: %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the secret: %v", err)
			}
			if c != (Client{}) {
				t.Errorf("Register gave %v with the error", c)
			}
			for _, p := range d.paths() {
				if p == "/elsewhere" {
					t.Error("a redirect was followed")
				}
			}
		})
	}
}

// TestRegisterRequest: what Register sends, and what it refuses to send.
func TestRegisterRequest(t *testing.T) {
	var got map[string]any
	var auth string
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&got) != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write([]byte(`{"client_id":"c1"}`))
	}))
	t.Cleanup(d.Close)
	s := serverAt(d.URL)
	_, err := Register(t.Context(), nil, s, RegistrationRequest{ClientName: "executor", RedirectURIs: []string{"https://executor.example.com/cb"}, Scope: "files:read files:write", InitialAccessToken: "iat"})
	if err != nil {
		t.Fatal(err)
	}
	want := `map[client_name:executor grant_types:[authorization_code refresh_token] redirect_uris:[https://executor.example.com/cb] response_types:[code] scope:files:read files:write token_endpoint_auth_method:none]`
	if fmt.Sprint(got) != want || auth != "Bearer iat" {
		t.Errorf("sent %v with Authorization %q, want %s with the initial access token", got, auth, want)
	}

	for _, tc := range []struct {
		name string
		r    RegistrationRequest
		want error
	}{
		{"no redirect URI", RegistrationRequest{}, ErrInvalid},
		{"a plain http redirect URI off loopback", RegistrationRequest{RedirectURIs: []string{"http://executor.example.com/cb"}}, ErrInsecureURL},
		{"a relative redirect URI", RegistrationRequest{RedirectURIs: []string{"/cb"}}, ErrInsecureURL},
		{"private_key_jwt", RegistrationRequest{RedirectURIs: []string{"https://e.example.com/cb"}, TokenEndpointAuthMethod: "private_key_jwt"}, ErrInvalid},
		{"a scope with a quote", RegistrationRequest{RedirectURIs: []string{"https://e.example.com/cb"}, Scope: `a "b"`}, ErrInvalid},
		{"a scope with two spaces", RegistrationRequest{RedirectURIs: []string{"https://e.example.com/cb"}, Scope: "a  b"}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Register(t.Context(), noRequests(t), s, tc.r); !errors.Is(err, tc.want) {
				t.Errorf("Register: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestMetadataDocument: the client ID metadata document the executor serves, and the URLs it
// may be served at.
func TestMetadataDocument(t *testing.T) {
	const id = "https://executor.example.com/oauth/client.json"
	b, err := MetadataDocument(id, RegistrationRequest{ClientName: "verdict executor", RedirectURIs: []string{"https://executor.example.com/oauth/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"client_id":"https://executor.example.com/oauth/client.json","client_name":"verdict executor","redirect_uris":["https://executor.example.com/oauth/callback"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}`
	if string(b) != want {
		t.Errorf("MetadataDocument =\n%s\nwant\n%s", b, want)
	}
	for _, tc := range []struct {
		name, id string
		r        RegistrationRequest
		want     error
	}{
		{"no path", "https://executor.example.com", RegistrationRequest{}, ErrInvalid},
		{"the root", "https://executor.example.com/", RegistrationRequest{}, ErrInvalid},
		{"a dot segment", "https://executor.example.com/a/../client.json", RegistrationRequest{}, ErrInvalid},
		{"a fragment", "https://executor.example.com/client.json#x", RegistrationRequest{}, ErrInsecureURL},
		{"a user", "https://u@executor.example.com/client.json", RegistrationRequest{}, ErrInsecureURL},
		{"plain http", "http://executor.example.com/client.json", RegistrationRequest{}, ErrInsecureURL},
		{"a secret", id, RegistrationRequest{TokenEndpointAuthMethod: AuthMethodBasic}, ErrInvalid},
		{"no redirect URI", id, RegistrationRequest{}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.r.RedirectURIs == nil && tc.name != "no redirect URI" {
				tc.r.RedirectURIs = []string{"https://executor.example.com/cb"}
			}
			if b, err := MetadataDocument(tc.id, tc.r); !errors.Is(err, tc.want) {
				t.Errorf("MetadataDocument = %s, %v; want %v", b, err, tc.want)
			}
		})
	}

	s := serverAt("https://as.example.com")
	if _, err := MetadataClient(s, id); !errors.Is(err, ErrNoClientIDMetadata) {
		t.Errorf("MetadataClient at a server without client ID metadata documents: %v", err)
	}
	s.ClientIDMetadataDocumentSupported = true
	if c, err := MetadataClient(s, id); err != nil || c != (Client{ID: id, AuthStyle: oauth2.AuthStyleInParams}) {
		t.Errorf("MetadataClient = %v, %v", c, err)
	}
}

// TestClientStyle: how a client's secret goes to the token endpoint, never both ways.
func TestClientStyle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       Client
		methods []string
		want    oauth2.AuthStyle
		err     bool
	}{
		{"public", Client{ID: "c", AuthStyle: oauth2.AuthStyleInHeader}, nil, oauth2.AuthStyleInParams, false},
		{"configured header", Client{ID: "c", Secret: "s", AuthStyle: oauth2.AuthStyleInHeader}, []string{AuthMethodPost}, oauth2.AuthStyleInHeader, false},
		{"configured params", Client{ID: "c", Secret: "s", AuthStyle: oauth2.AuthStyleInParams}, nil, oauth2.AuthStyleInParams, false},
		{"none listed: Basic", Client{ID: "c", Secret: "s"}, nil, oauth2.AuthStyleInHeader, false},
		{"both listed: Basic", Client{ID: "c", Secret: "s"}, []string{AuthMethodPost, AuthMethodBasic}, oauth2.AuthStyleInHeader, false},
		{"post alone", Client{ID: "c", Secret: "s"}, []string{AuthMethodPost}, oauth2.AuthStyleInParams, false},
		{"neither", Client{ID: "c", Secret: "s"}, []string{"private_key_jwt"}, 0, true},
		{"unknown style", Client{ID: "c", Secret: "s", AuthStyle: 7}, nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serverAt("https://as.example.com")
			s.TokenEndpointAuthMethodsSupported = tc.methods
			got, err := tc.c.style(s)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("style = %d, %v; want %d (error %t)", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestRegisteredStyle: a registered client sends its secret as the method it registered says;
// with a method other than the three a registration asks for, the style is left to the server's
// metadata, and a server that takes neither secret method is refused rather than sent the secret.
func TestRegisteredStyle(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   oauth2.AuthStyle
	}{
		{AuthMethodBasic, oauth2.AuthStyleInHeader},
		{AuthMethodPost, oauth2.AuthStyleInParams},
		{"private_key_jwt", oauth2.AuthStyleAutoDetect},
	} {
		c, err := registered(registration{ClientID: "id", ClientSecret: "sec"}, clientMetadata{TokenEndpointAuthMethod: tc.method})
		if err != nil || c.AuthStyle != tc.want {
			t.Errorf("%s: style %d, %v; want %d", tc.method, c.AuthStyle, err, tc.want)
		}
	}
	c, _ := registered(registration{ClientID: "id", ClientSecret: "sec"}, clientMetadata{TokenEndpointAuthMethod: "private_key_jwt"})
	s := serverAt("https://as.example.com")
	s.TokenEndpointAuthMethodsSupported = []string{"private_key_jwt"}
	if _, err := c.style(s); err == nil {
		t.Error("a server that takes neither secret method is sent the secret")
	}
}

// TestClientPrinting: a Client's secret prints as [redacted] under every verb and in
// log/slog; its ID shows.
func TestClientPrinting(t *testing.T) {
	const secret = "client-secret-4f1e"
	c := Client{ID: "c1", Secret: secret}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c), fmt.Sprintf(verb, []Client{c}))
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "client", c)
	out = append(out, logged.String())
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(b), string(y))
	for _, s := range out {
		if strings.Contains(s, secret) {
			t.Errorf("%q holds the secret", s)
		}
	}
	if !strings.Contains(fmt.Sprint(c), "c1") || !strings.Contains(logged.String(), `"id":"c1"`) {
		t.Errorf("the client's ID is not shown: %v, %s", c, logged.String())
	}
}
