package identity

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMetadataURL(t *testing.T) {
	for resource, want := range map[string]string{
		"https://gw.test":          "https://gw.test/.well-known/oauth-protected-resource",
		"https://gw.test/":         "https://gw.test/.well-known/oauth-protected-resource",
		"https://gw.test/mcp":      "https://gw.test/.well-known/oauth-protected-resource/mcp",
		"http://127.0.0.1:8792/a/": "http://127.0.0.1:8792/.well-known/oauth-protected-resource/a",
	} {
		if got, err := MetadataURL(resource); err != nil || got != want {
			t.Errorf("MetadataURL(%q) = %q, %v, want %q", resource, got, err, want)
		}
	}
	if _, err := MetadataURL("mcp"); err == nil {
		t.Error("MetadataURL accepted a relative resource")
	}
}

func TestResourceMetadata(t *testing.T) {
	c := Config{Issuers: []Issuer{
		{Issuer: "https://a.test", Audience: "https://gw.test/mcp", Scopes: []string{"tools"}},
		{Issuer: "https://b.test", Audience: "https://elsewhere.test"},
		{Issuer: "https://c.test", Audience: "https://gw.test/mcp", Scopes: []string{"tools", "admin"}},
	}}
	rec := httptest.NewRecorder()
	c.ResourceMetadata("https://gw.test/mcp").ServeHTTP(rec, httptest.NewRequest("GET", WellKnownPath+"/mcp", nil))
	want := `{"resource":"https://gw.test/mcp","authorization_servers":["https://a.test","https://c.test"],"scopes_supported":["tools","admin"],"bearer_methods_supported":["header"]}`
	if rec.Code != 200 || rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("got %d %s %s\nwant %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}
	rec = httptest.NewRecorder()
	c.ResourceMetadata("x").ServeHTTP(rec, httptest.NewRequest("POST", WellKnownPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header []string
		token  string
		reason Reason
	}{
		{nil, "", TokenMissing},
		{[]string{"Bearer abc.def"}, "abc.def", ""},
		{[]string{"bearer  abc"}, "abc", ""},
		{[]string{"Basic YTpi"}, "", TokenMalformed},
		{[]string{"Bearer"}, "", TokenMalformed},
		{[]string{"Bearer "}, "", TokenMalformed},
		{[]string{"Bearer a b"}, "", TokenMalformed},
		{[]string{"Bearer a", "Bearer b"}, "", TokenMalformed},
	} {
		r := httptest.NewRequest("GET", "/?access_token=x", nil)
		for _, h := range tc.header {
			r.Header.Add("Authorization", h)
		}
		got, err := BearerToken(r)
		if got != tc.token || ReasonOf(err) != tc.reason {
			t.Errorf("%q: %q, %v, want %q, %q", tc.header, got, err, tc.token, tc.reason)
		}
	}
}

func TestWriteError(t *testing.T) {
	const md = "https://gw.test/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		err       error
		scope     []string
		status    int
		challenge string
	}{
		{&Error{Reason: TokenMissing}, nil, 401, `Bearer resource_metadata="` + md + `"`},
		{&Error{Reason: TokenExpired, Err: errors.New(`"secret" detail`)}, nil, 401,
			`Bearer resource_metadata="` + md + `", error="invalid_token", error_description="the access token expired"`},
		{&Error{Reason: InsufficientScope}, []string{"tools:call", "admin"}, 403,
			`Bearer resource_metadata="` + md + `", error="insufficient_scope", error_description="the access token lacks a required scope", scope="tools:call admin"`},
		{&Error{Reason: IdPUnavailable}, nil, 503,
			`Bearer resource_metadata="` + md + `", error="invalid_token", error_description="the authorization server cannot be reached to verify the access token"`},
		{errors.New("anything"), nil, 401, `Bearer resource_metadata="` + md + `", error="invalid_token"`},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, md, tc.err, tc.scope...)
		if got := rec.Header().Get("WWW-Authenticate"); rec.Code != tc.status || got != tc.challenge {
			t.Errorf("%v: %d %s\nwant %d %s", tc.err, rec.Code, got, tc.status, tc.challenge)
		}
		if strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("%v: the answer echoes the error's detail: %s", tc.err, rec.Body)
		}
	}
}

func TestErrorMatching(t *testing.T) {
	err := error(refuse(WrongAudience, "https://a.test", "aud %q", "x"))
	wrapped := errors.Join(errors.New("context"), err)
	if !errors.Is(wrapped, WrongAudience) || errors.Is(wrapped, WrongIssuer) || ReasonOf(wrapped) != WrongAudience {
		t.Errorf("errors.Is/ReasonOf do not find the reason of %v", wrapped)
	}
	var e *Error
	if !errors.As(wrapped, &e) || e.Issuer != "https://a.test" {
		t.Errorf("errors.As: %v", e)
	}
	if ReasonOf(errors.New("x")) != "" {
		t.Error("ReasonOf of a foreign error")
	}
}
