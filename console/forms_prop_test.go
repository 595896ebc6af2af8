package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyOnlyOwnFormsReachVerdictd: whatever a request carries — any Origin and
// Sec-Fetch-Site, any form token, any session cookie — a decision reaches verdictd exactly when
// the request is in a live session, carries that session's form token and comes from the
// console's own origin (Origin equal to it, or Origin null or absent with Sec-Fetch-Site
// same-origin); every other request is refused with 401 or 403.
func TestPropertyOnlyOwnFormsReachVerdictd(t *testing.T) {
	h := newHarness(t, testIssuer, nil)
	h.stub.add(transfer(h, "apr_01"))
	mine := h.signIn("id2", "payments-approvers")
	other := h.signIn("id3", "payments-approvers")
	own := h.srv.URL
	rapid.Check(t, func(rt *rapid.T) {
		origin := rapid.SampledFrom([]string{"", "null", own, own + "/", strings.ToUpper(own), strings.Replace(own, "127.0.0.1", "localhost", 1),
			"https://evil.example", own + ".evil.example", "http://127.0.0.1"}).Draw(rt, "origin")
		site := rapid.SampledFrom([]string{"", "same-origin", "same-site", "cross-site", "none", "Same-Origin"}).Draw(rt, "site")
		cookie := rapid.SampledFrom([]string{"mine", "other", "none", "forged"}).Draw(rt, "cookie")
		token := rapid.SampledFrom([]string{"mine", "other", "empty", "mutated", "twice"}).Draw(rt, "token")

		var c *http.Cookie
		switch cookie {
		case "mine":
			c = mine
		case "other":
			c = other
		case "forged":
			// Another first character: it changes the first byte the value encodes. (A new
			// last character can leave the value as it was: one in sixteen ends in "A".)
			first := "A"
			if mine.Value[0] == 'A' {
				first = "B"
			}
			c = &http.Cookie{Name: mine.Name, Value: first + mine.Value[1:]}
		}
		form := url.Values{"decision": {"deny"}, "arguments_digest": {digestB}} // a stale digest: nothing is ever decided
		switch token {
		case "mine":
			form.Set("csrf_token", h.csrf(mine))
		case "other":
			form.Set("csrf_token", h.csrf(other))
		case "mutated":
			form.Set("csrf_token", h.csrf(mine)[1:]+"A")
		case "twice":
			form["csrf_token"] = []string{"x", h.csrf(mine)}
		}
		before, _ := h.stub.sent()
		r := h.do("POST", "/approvals/apr_01", c, form, map[string]string{"Origin": origin, "Sec-Fetch-Site": site})
		after, _ := h.stub.sent()
		reached := len(after) > len(before)

		sameOrigin := (site == "" || site == "same-origin") &&
			(origin == own || ((origin == "" || origin == "null") && site == "same-origin"))
		sessionOK := cookie == "mine" || cookie == "other"
		tokenOK := (cookie == "mine" && token == "mine") || (cookie == "other" && token == "other")
		want := sameOrigin && sessionOK && tokenOK
		if reached != want {
			rt.Fatalf("origin %q site %q cookie %s token %s: reached verdictd %v, want %v (status %d)", origin, site, cookie, token, reached, want, r.status)
		}
		if !want && r.status != http.StatusForbidden && r.status != http.StatusUnauthorized {
			rt.Fatalf("refused with %d", r.status)
		}
	})
}
