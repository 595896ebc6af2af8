package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

func TestTokensMatch(t *testing.T) {
	toks, err := NewTokens([]Token{{Name: "agent", TokenSHA256: HashToken("s3cret")}, {Name: "ops", TokenSHA256: HashToken("other")}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer s3cret", "agent", true},
		{"bearer other", "ops", true},
		{"Bearer s3cret ", "", false},
		{"Bearer ", "", false},
		{"Basic s3cret", "", false},
		{"", "", false},
		{"Bearer S3CRET", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		name, ok := toks.Match(r)
		if name != tt.want || ok != tt.ok {
			t.Errorf("%q: got (%q,%v), want (%q,%v)", tt.header, name, ok, tt.want, tt.ok)
		}
	}
	var none *Tokens
	if _, ok := none.Match(httptest.NewRequest("GET", "/", nil)); ok {
		t.Fatal("nil token set must match nothing")
	}
}

func TestNewTokensRejectsBadHash(t *testing.T) {
	for _, h := range []string{"", "abc", strings.Repeat("z", 64), strings.Repeat("a", 62)} {
		if _, err := NewTokens([]Token{{Name: "x", TokenSHA256: h}}); err == nil {
			t.Errorf("hash %q accepted", h)
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	type req struct {
		A string `json:"a"`
		N int    `json:"n"`
	}
	tests := []struct {
		body string
		code string
	}{
		{`{"a":"x","n":1}`, ""},
		{`{"a":"x","b":1}`, api.CodeUnknownField},
		{`{"a":1}`, CodeWrongType},
		{`{"a":"x"`, CodeMalformedJSON},
		{``, CodeMalformedJSON},
		{`{"a":"x"} {"a":"y"}`, CodeMalformedJSON},
		{`{"a":"x"} x`, CodeMalformedJSON},
		{`[1]`, CodeWrongType},
		{`{"a":"x","a":"y"}`, CodeDuplicateKey},
		{`{"A":"x"}`, api.CodeUnknownField},
		{`{"\u0041":"x"}`, api.CodeUnknownField},
		{"{\"a\":\"\xff\"}", CodeMalformedJSON},
	}
	for _, tt := range tests {
		var v req
		err := DecodeStrict([]byte(tt.body), &v)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.body, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != tt.code || e.Status != http.StatusBadRequest {
			t.Errorf("%s: got %v, want code %s", tt.body, err, tt.code)
		}
	}
}

func TestReadBodyLimit(t *testing.T) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 100)))
	_, err := ReadBody(w, r, 10)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge || e.Code != CodeBodyTooLarge {
		t.Fatalf("got %v", err)
	}
	r = httptest.NewRequest("POST", "/", strings.NewReader("{}"))
	r.Header.Set("Content-Type", "text/plain")
	if _, err := ReadBody(w, r, 10); !errors.As(err, &e) || e.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("got %v", err)
	}
}

func TestWriteErrorHidesInternals(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, errors.New("open /secret/path: permission denied"))
	if w.Code != 500 || strings.Contains(w.Body.String(), "secret") {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{":6060", false},
		{"0.0.0.0:6060", false},
		{"10.0.0.1:6060", false},
		{"example.com:6060", false},
		{"127.0.0.1", false},
	}
	for _, tt := range tests {
		if err := CheckLoopback(tt.addr); (err == nil) != tt.ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
}

func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 3000)
	tests := []struct {
		name     string
		declared int64 // -1: unknown length
		limit    int64
		want     string // "" = 413
	}{
		{"declared", int64(len(body)), 4096, body},
		{"unknown length", -1, 4096, body},
		{"declared short", 10, 4096, body},
		{"declared long", 10_000, 4096, body},
		{"over the limit", int64(len(body)), 100, ""},
		{"over the limit, unknown length", -1, 100, ""},
		{"exactly the limit", int64(len(body)), int64(len(body)), body},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ContentLength = tt.declared
		got, err := ReadBody(httptest.NewRecorder(), r, tt.limit)
		var e *Error
		switch {
		case tt.want == "" && !(errors.As(err, &e) && e.Code == CodeBodyTooLarge):
			t.Errorf("%s: %v, want %s", tt.name, err, CodeBodyTooLarge)
		case tt.want != "" && (err != nil || string(got) != tt.want):
			t.Errorf("%s: %d bytes, %v", tt.name, len(got), err)
		}
	}
}

func TestRequire(t *testing.T) {
	toks, _ := NewTokens([]Token{{Name: "a", TokenSHA256: HashToken("good")}})
	var none *Tokens
	const missing, rejected = "a token is required", "the token is not accepted"
	tests := []struct {
		name      string
		set       *Tokens
		header    string
		ok        bool
		err       error  // what Check says
		message   string // of the 401
		challenge string
	}{
		{"the right token", toks, "Bearer good", true, nil, "", ""},
		{"a wrong token", toks, "Bearer bad", false, ErrTokenNotAccepted, rejected, `Bearer realm="realm-x", error="invalid_token"`},
		{"no header", toks, "", false, ErrNoToken, missing, `Bearer realm="realm-x"`},
		{"another scheme", toks, "Basic Z29vZA==", false, ErrNoToken, missing, `Bearer realm="realm-x"`},
		{"an empty bearer token", toks, "Bearer ", false, ErrNoToken, missing, `Bearer realm="realm-x"`},
		{"a token where none is configured", none, "Bearer good", false, ErrTokenNotAccepted, rejected, `Bearer realm="realm-x", error="invalid_token"`},
		{"no token where none is configured", none, "", false, ErrNoToken, missing, `Bearer realm="realm-x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			if _, err := tt.set.Check(r); !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("Check: %v, want %v", err, tt.err)
			}
			w := httptest.NewRecorder()
			if got := tt.set.Require(w, r, "realm-x", missing, rejected); got != tt.ok {
				t.Fatalf("Require: %v, want %v", got, tt.ok)
			}
			if tt.ok {
				if w.Body.Len() != 0 || w.Header().Get("WWW-Authenticate") != "" {
					t.Errorf("an accepted request got an answer: %d %v %s", w.Code, w.Header(), w.Body)
				}
				return
			}
			want := `{"error":{"code":"unauthorized","message":"` + tt.message + `"}}` + "\n"
			if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != tt.challenge || w.Body.String() != want {
				t.Errorf("got %d %q %s, want 401 %q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body, tt.challenge, want)
			}
		})
	}
}
