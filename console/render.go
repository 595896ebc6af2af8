package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/verdictgate/verdict/visible"
)

// page is what every template is rendered with.
type page struct {
	Title   string
	User    *session
	CSRF    string
	Problem *problem
	// SignIn, when set, is a sign-in link the page offers (a session that ended).
	SignIn string
	// Body is the page's own data.
	Body any
}

type pageTemplate struct{ t *template.Template }

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	// visible is text from elsewhere (a webhook's reason) with invisible and reordering
	// characters written out, as drafts are shown.
	"visible": visible.Text,
}

// parsePages parses every page template with the layout.
func parsePages() (map[string]*pageTemplate, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*pageTemplate{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", n, err)
		}
		out[base] = &pageTemplate{t: t}
	}
	return out, nil
}

// render writes a page. It renders into a buffer first, so that a template error is a 500 page
// rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := s.pages[name]
	if !ok {
		s.log.Error("render", "error", "no template "+name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := t.t.ExecuteTemplate(&b, "layout", p); err != nil {
		s.log.Error("render", "template", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// renderProblem writes a page that only says what went wrong, for a request that may have no
// session.
func (s *Server) renderProblem(w http.ResponseWriter, r *http.Request, pr problem) {
	p := page{Title: "Not done", Problem: &pr}
	if sess, err := s.session(r); err == nil {
		p.User, p.CSRF = &sess, sess.CSRF
	}
	s.render(w, r, pr.Status, "problem", p)
}

// renderProblemAs is renderProblem for a signed-in user.
func (s *Server) renderProblemAs(w http.ResponseWriter, r *http.Request, sess session, pr problem) {
	s.render(w, r, pr.Status, "problem", page{Title: "Not done", User: &sess, CSRF: sess.CSRF, Problem: &pr})
}

// signedIn is a page for a signed-in user.
func signedIn(sess session, title string, body any) page {
	return page{Title: title, User: &sess, CSRF: sess.CSRF, Body: body}
}

// signedInWith is signedIn with pr, when not nil, at the page's top.
func signedInWith(sess session, title string, body any, pr *problem) page {
	p := signedIn(sess, title, body)
	p.Problem = pr
	return p
}
