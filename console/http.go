package console

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/verdictgate/verdict/internal/loopback"
)

// contentSecurityPolicy allows the pages their own stylesheet and images and nothing else: no
// script at all, no framing, forms posted only to the console.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every answer carries. Pages are never cached: they show
// argument values, and the approver's name.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "public, max-age=3600")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// cookieSpec is the name and attributes of one of the console's cookies.
type cookieSpec struct {
	name   string
	secure bool
}

// cookieNames returns the session and sign-in cookies for the public URL. They are Secure and
// __Host- prefixed (no Domain, Path=/, so that no other host or path can set or read them),
// except on plain http on a loopback host: browsers refuse a __Host- cookie that is not Secure,
// and a Secure cookie is not sent over http, so there the names go without the prefix.
func cookieNames(public *url.URL) (session, login cookieSpec) {
	if public.Scheme == "http" && loopback.Host(public.Hostname()) {
		return cookieSpec{name: "verdict-console-session"}, cookieSpec{name: "verdict-console-login"}
	}
	return cookieSpec{name: "__Host-verdict-console-session", secure: true}, cookieSpec{name: "__Host-verdict-console-login", secure: true}
}

func (s *Server) setCookie(w http.ResponseWriter, c cookieSpec, value string, life time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: c.name, Value: value, Path: "/", MaxAge: int(life / time.Second),
		Secure: c.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearCookie(w http.ResponseWriter, c cookieSpec) {
	http.SetCookie(w, &http.Cookie{Name: c.name, Value: "", Path: "/", MaxAge: -1, Secure: c.secure, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func (s *Server) cookieValue(r *http.Request, c cookieSpec) string {
	k, err := r.Cookie(c.name)
	if err != nil {
		return ""
	}
	return k.Value
}

// session returns the request's live session: errNoSession without one, errSessionStore when
// the store cannot say.
func (s *Server) session(r *http.Request) (session, error) {
	sess, err := s.sessions.get(r.Context(), s.cookieValue(r, s.sessionCookie))
	if err != nil && !errors.Is(err, errNoSession) {
		s.log.Warn("session store", "error", err.Error())
	}
	return sess, err
}

// storeUnavailable answers a request whose session could not be checked: 503, never the page,
// and never a sign-in, which could not be stored either.
func (s *Server) storeUnavailable(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusServiceUnavailable, "problem", page{Title: "Not done",
		Problem: &problem{Status: http.StatusServiceUnavailable, Code: codeSessionStoreUnavailable, Words: words(codeSessionStoreUnavailable, "")}})
}

// page wraps a GET handler that needs a signed-in user: without a session the browser is sent
// to sign in, and back to this page afterwards.
func (s *Server) page(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.session(r)
		if errors.Is(err, errSessionStore) {
			s.storeUnavailable(w, r)
			return
		}
		if err != nil {
			http.Redirect(w, r, "/login?"+url.Values{"return": {safeReturn(r.URL.RequestURI())}}.Encode(), http.StatusSeeOther)
			return
		}
		h(w, r, sess)
	}
}

// maxForm bounds a form's body.
const maxForm = 16 << 10

// form wraps a POST handler: the request must come from one of the console's own pages
// (checkOrigin), in a live session, with the session's form token, compared in constant time.
// Anything else is refused before the handler runs, and nothing is sent to verdictd.
func (s *Server) form(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return s.formOf(maxForm, h)
}

// formOf is form for a body of at most limit bytes, which may be multipart/form-data (a file
// upload), held in memory whole.
func (s *Server) formOf(limit int64, h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.sameOrigin(r) {
			s.metrics.forms.WithLabelValues(codeOrigin).Inc()
			s.renderProblem(w, r, problem{Status: http.StatusForbidden, Code: codeOrigin, Words: words(codeOrigin, "")})
			return
		}
		sess, err := s.session(r)
		if errors.Is(err, errSessionStore) {
			s.metrics.forms.WithLabelValues(codeSessionStoreUnavailable).Inc()
			s.storeUnavailable(w, r)
			return
		}
		if err != nil {
			s.metrics.forms.WithLabelValues(codeSessionEnded).Inc()
			s.render(w, r, http.StatusUnauthorized, "problem", page{Title: "Sign in again",
				Problem: &problem{Status: http.StatusUnauthorized, Code: codeSessionEnded, Words: words(codeSessionEnded, "")},
				SignIn:  signInLink(r.URL.Path)})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" && limit > maxForm {
			err = r.ParseMultipartForm(limit)
		} else {
			err = r.ParseForm()
		}
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok && limit > maxForm {
			s.renderProblemAs(w, r, sess, problem{Status: http.StatusRequestEntityTooLarge, Code: codePolicyTooLarge,
				Words: words(codePolicyTooLarge, ""), Details: fmt.Sprintf("at most %d bytes", mbe.Limit)})
			return
		}
		if err != nil {
			s.renderProblemAs(w, r, sess, problem{Status: http.StatusBadRequest, Code: codeBadForm, Words: words(codeBadForm, "")})
			return
		}
		token := r.PostForm.Get("csrf_token")
		if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.CSRF)) != 1 {
			s.metrics.forms.WithLabelValues(codeCSRF).Inc()
			s.log.Warn("form refused", "code", codeCSRF, "subject", sess.Subject, "path", r.URL.Path)
			s.renderProblemAs(w, r, sess, problem{Status: http.StatusForbidden, Code: codeCSRF, Words: words(codeCSRF, "")})
			return
		}
		h(w, r, sess)
	}
}

// sameOrigin checks where a POST comes from. A browser names it in Origin, except that the
// console's pages are served with Referrer-Policy: no-referrer, under which browsers send
// "Origin: null" on a form POST; then Sec-Fetch-Site, which browsers set themselves and no page
// can forge, must say same-origin. A request that carries neither is refused: every browser
// the console supports sends one of them.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return false
	}
	switch origin {
	case "", "null":
		return site == "same-origin"
	}
	return origin == s.public.Scheme+"://"+s.public.Host
}

// signInLink is the sign-in address that comes back to path.
func signInLink(path string) string {
	return "/login?" + url.Values{"return": {safeReturn(path)}}.Encode()
}
