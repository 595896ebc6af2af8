package vault

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"
)

// TestGrantNeverPrintsTokens: for random tokens, no way of printing, logging or encoding a
// Grant for the outside shows them: every fmt verb on the grant, its pointer and containers
// of it, log/slog's JSON and text handlers, encoding/json (v1 and v2) and YAML.
func TestGrantNeverPrintsTokens(t *testing.T) {
	// Tokens of the characters OAuth tokens are made of (base64url, JWT dots, the rest of RFC
	// 6750's b64token): characters no encoder escapes, so a token that leaked is found as it is.
	// Sixteen characters at least, so that one cannot turn up by chance in the text around it.
	tokenGen := rapid.StringMatching(`[A-Za-z0-9._~+/-]{16,80}`)
	rapid.Check(t, func(rt *rapid.T) {
		g := Grant{
			ID:           newID(),
			Principal:    rapid.StringMatching(`[a-z0-9@.]{1,20}`).Draw(rt, "principal"),
			Server:       rapid.StringMatching(`[a-z0-9-]{1,20}`).Draw(rt, "server"),
			Kind:         rapid.SampledFrom([]Kind{KindUserGrant, KindTokenExchange}).Draw(rt, "kind"),
			Subject:      rapid.StringMatching(`[a-z0-9|]{0,20}`).Draw(rt, "subject"),
			Issuer:       rapid.StringMatching(`https://[a-z]{1,10}\.test`).Draw(rt, "issuer"),
			ClientID:     rapid.StringMatching(`[a-z0-9-]{0,20}`).Draw(rt, "client"),
			ClientSecret: rapid.OneOf(rapid.Just(""), tokenGen).Draw(rt, "client secret"),
			AccessToken:  tokenGen.Draw(rt, "access"),
			RefreshToken: rapid.OneOf(rapid.Just(""), tokenGen).Draw(rt, "refresh"),
			TokenType:    "Bearer",
			Expiry:       time.Unix(rapid.Int64Range(0, 4e9).Draw(rt, "expiry"), 0),
			Scopes:       rapid.SliceOfN(rapid.StringMatching(`[a-z:]{1,10}`), 0, 3).Draw(rt, "scopes"),
			Created:      time.Unix(1_800_000_000, 0),
			Updated:      time.Unix(1_800_000_001, 0),
		}
		secrets := []string{g.AccessToken}
		for _, sec := range []string{g.RefreshToken, g.ClientSecret} {
			if sec != "" {
				secrets = append(secrets, sec)
			}
		}

		var outputs []string
		add := func(what string, s string) { outputs = append(outputs, what+": "+s) }
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%10.3v", "%-8s"} {
			add(verb, fmt.Sprintf(verb, g))
			add(verb+" pointer", fmt.Sprintf(verb, &g))
			add(verb+" slice", fmt.Sprintf(verb, []Grant{g}))
			add(verb+" map", fmt.Sprintf(verb, map[string]Grant{"k": g}))
			add(verb+" field", fmt.Sprintf(verb, struct{ G Grant }{g}))
			add(verb+" any", fmt.Sprintf(verb, []any{g, &g}))
		}
		add("Sprint", fmt.Sprint(g, &g))
		add("Sprintln", fmt.Sprintln(g, &g))
		add("String", g.String())
		add("GoString", g.GoString())
		add("error", fmt.Errorf("with %v: %w", g, ErrTampered).Error())

		var logs bytes.Buffer
		for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
			l := slog.New(h)
			l.Info("grant", "grant", g, "pointer", &g, "info", g.Info())
			l.Info("grant", slog.Any("grant", g), slog.Group("in", "grant", g))
			l.With("grant", g).Info("with")
		}
		add("slog", logs.String())

		for what, v := range map[string]any{"value": g, "pointer": &g, "slice": []Grant{g}, "field": struct{ G Grant }{g}, "info": g.Info()} {
			b, err := json.Marshal(v)
			if err != nil {
				rt.Fatalf("json %s: %v", what, err)
			}
			add("json "+what, string(b))
			b, err = jsonv2.Marshal(v)
			if err != nil {
				rt.Fatalf("json v2 %s: %v", what, err)
			}
			add("json v2 "+what, string(b))
			b, err = yaml.Marshal(v)
			if err != nil {
				rt.Fatalf("yaml %s: %v", what, err)
			}
			add("yaml "+what, string(b))
		}

		for _, out := range outputs {
			for _, s := range secrets {
				for _, form := range []string{s, hex.EncodeToString([]byte(s)), strings.ToUpper(hex.EncodeToString([]byte(s)))} {
					if strings.Contains(out, form) {
						rt.Fatalf("a token shows in %s", out)
					}
				}
			}
		}
		// What is shown instead still says the grant has its tokens.
		if !strings.Contains(fmt.Sprint(g), "access_token: [redacted]") || !strings.Contains(logs.String(), `"access_token":"[redacted]"`) {
			rt.Fatalf("no redaction mark in %s / %s", g, logs.String())
		}
		if want := g.RefreshToken != ""; strings.Contains(fmt.Sprint(g), "refresh_token: [redacted]") != want {
			rt.Fatalf("refresh token shown as present=%v: %s", !want, g)
		}
	})
}

// TestGrantJSONIsInfo: a Grant marshals exactly as its Info, the tokens' presence as
// has_refresh_token only.
func TestGrantJSONIsInfo(t *testing.T) {
	g := sampleGrant("alice", "files")
	g.ID, g.Created, g.Updated = newID(), time.Unix(1_800_000_000, 0).UTC(), time.Unix(1_800_000_001, 0).UTC()
	a, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(g.Info())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s\n%s", a, b)
	}
	want := `{"id":"` + g.ID + `","principal":"alice","server":"files","kind":"user_grant","subject":"upstream-user-alice","token_type":"Bearer","expiry":"2027-01-15T09:00:00Z","scopes":["read","write:files"],"has_refresh_token":true,"created":"2027-01-15T08:00:00Z","updated":"2027-01-15T08:00:01Z"}`
	if string(a) != want {
		t.Fatalf("got  %s\nwant %s", a, want)
	}
}
