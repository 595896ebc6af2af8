package console

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/visible"
)

// pendingRow is one line of the pending list.
type pendingRow struct {
	ID, Principal, Server, Tool string
	CreatedAt, ExpiresAt        time.Time
	Arguments                   int
	MayDecide                   bool
	Why                         string
}

// handlePending lists the pending approvals, as verdictd shows them to this approver.
func (s *Server) handlePending(w http.ResponseWriter, r *http.Request, sess session) {
	list, err := s.api.pending(r.Context(), sess.AccessToken)
	if err != nil {
		s.renderRefusal(w, r, sess, "Pending approvals", err, "")
		return
	}
	rows := make([]pendingRow, 0, len(list))
	for i := range list {
		a := &list[i]
		if !approvalIDPattern.MatchString(a.ApprovalID) {
			s.log.Warn("verdictd listed an approval id the console does not link to", "approval_id", a.ApprovalID)
			continue
		}
		row := pendingRow{ID: a.ApprovalID, Principal: a.Principal, Server: a.Server, Tool: a.Tool,
			CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, Arguments: len(a.Arguments), MayDecide: a.MayDecide}
		if !a.MayDecide {
			row.Why = refusalReason(a)
		}
		rows = append(rows, row)
	}
	s.render(w, r, http.StatusOK, "pending", signedIn(sess, "Pending approvals", rows))
}

// argumentRow is one argument as the approval page shows it.
type argumentRow struct {
	Name, Value string
	Hidden      int
}

type draftRow struct {
	Field, Text, Digest string
	Bytes               int64
	Hidden              int
}

type slotRow struct {
	SlotID, Question, Value string
}

// approvalView is what the approval page shows: exactly what would run.
type approvalView struct {
	*approval
	Args    []argumentRow
	Drafts  []draftRow
	Slots   []slotRow
	Why     string // why the buttons are disabled
	Decided string // "approve" or "deny" right after this approver's decision
	Pending bool
}

func newApprovalView(a *approval) *approvalView {
	v := &approvalView{approval: a, Pending: a.State == api.ApprovalPending}
	for _, n := range slices.Sorted(maps.Keys(a.Arguments)) {
		shown, hiddenRunes := shownJSON(a.Arguments[n])
		name, nameHidden := shownText(n)
		v.Args = append(v.Args, argumentRow{Name: name, Value: shown, Hidden: hiddenRunes + nameHidden})
	}
	for _, d := range a.Drafts {
		text, n := shownJSON(d.Text)
		var str string
		if jsonv2.Unmarshal(d.Text, &str) == nil && d.Text.Kind() == '"' {
			text, n = shownText(str)
		}
		v.Drafts = append(v.Drafts, draftRow{Field: d.Field, Text: text, Digest: d.Digest, Bytes: d.Bytes, Hidden: n})
	}
	for _, sl := range a.Slots {
		value, _ := shownJSON(sl.Value)
		v.Slots = append(v.Slots, slotRow{SlotID: sl.SlotID, Question: sl.Question, Value: value})
	}
	if !a.MayDecide && v.Pending {
		v.Why = refusalReason(a)
	}
	return v
}

// handleApproval shows one approval. It works for a user who is not signed in yet (the
// gateway sends the host's user here): Server.page sends them to sign in and back.
func (s *Server) handleApproval(w http.ResponseWriter, r *http.Request, sess session) {
	id := r.PathValue("id")
	if !approvalIDPattern.MatchString(id) {
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusNotFound, Code: api.CodeNotFound, Words: words(api.CodeNotFound, "")})
		return
	}
	a, err := s.api.get(r.Context(), sess.AccessToken, id)
	if err != nil {
		s.renderRefusal(w, r, sess, "Approval", err, "")
		return
	}
	v := newApprovalView(a)
	// The note after a decision is shown only when verdictd says this approver made it: a link
	// with ?decided=approve must not make anyone believe they approved what they did not.
	switch d := r.URL.Query().Get("decided"); {
	case a.DecidedBy != sess.Subject:
	case d == api.DecisionApprove && a.State == api.ApprovalApproved, d == api.DecisionDeny && a.State == api.ApprovalDenied:
		v.Decided = d
	}
	s.render(w, r, http.StatusOK, "approval", signedIn(sess, "Approval of "+visible.Text(a.Server)+"/"+visible.Text(a.Tool), v))
}

// handleDecide posts the approver's decision to verdictd with the approver's own access token
// and the arguments digest the page showed; verdictd refuses it if the values changed since.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request, sess session) {
	id := r.PathValue("id")
	decision := r.PostForm.Get("decision")
	digest := r.PostForm.Get("arguments_digest")
	if !approvalIDPattern.MatchString(id) || (decision != api.DecisionApprove && decision != api.DecisionDeny) || !digestPattern.MatchString(digest) {
		s.metrics.forms.WithLabelValues(codeBadForm).Inc()
		s.renderProblemAs(w, r, sess, problem{Status: http.StatusBadRequest, Code: codeBadForm, Words: words(codeBadForm, "")})
		return
	}
	if !sess.TokenExpiry.IsZero() && !s.now().Before(sess.TokenExpiry) {
		s.metrics.decided(decision, codeTokenExpired)
		// Sending a token verdictd will refuse helps no one: say so, and offer a fresh sign-in
		// that comes back to the approval to review it again.
		s.render(w, r, http.StatusUnauthorized, "problem", page{Title: "Sign in again", User: &sess, CSRF: sess.CSRF,
			Problem: &problem{Status: http.StatusUnauthorized, Code: codeTokenExpired, Words: words(codeTokenExpired, "")},
			SignIn:  signInLink("/approvals/" + id)})
		return
	}
	a, err := s.api.decide(r.Context(), sess.AccessToken, id, decision, digest)
	if err != nil {
		s.log.Info("decision refused", "approval_id", id, "subject", sess.Subject, "decision", decision, "error", err.Error())
		pr := refusal(r.Context(), err, "")
		s.metrics.decided(decision, pr.Code)
		// Show the approval as it is now beside the refusal, when verdictd still shows it.
		if cur, gerr := s.api.get(r.Context(), sess.AccessToken, id); gerr == nil {
			pr = refusal(r.Context(), err, cur.Group)
			p := signedInWith(sess, "Approval of "+visible.Text(cur.Server)+"/"+visible.Text(cur.Tool), newApprovalView(cur), &pr)
			if pr.Code == api.CodeUnauthorized {
				p.SignIn = signInLink("/approvals/" + id)
			}
			s.render(w, r, pr.Status, "approval", p)
			return
		}
		s.renderProblemAs(w, r, sess, pr)
		return
	}
	s.metrics.decided(decision, "decided")
	s.log.Info("decided", "approval_id", id, "subject", sess.Subject, "decision", decision, "state", a.State)
	http.Redirect(w, r, "/approvals/"+url.PathEscape(id)+"?"+url.Values{"decided": {decision}}.Encode(), http.StatusSeeOther)
}

// renderRefusal shows a refusal of verdictd's approvals API in words, with its code.
func (s *Server) renderRefusal(w http.ResponseWriter, r *http.Request, sess session, title string, err error, group string) {
	pr := refusal(r.Context(), err, group)
	if pr.Code == codeUnavailable || pr.Code == codeBadAnswer {
		s.log.Warn("verdictd", "error", err.Error())
	}
	p := page{Title: title, User: &sess, CSRF: sess.CSRF, Problem: &pr}
	if pr.Code == api.CodeUnauthorized {
		p.SignIn = signInLink(r.URL.RequestURI())
	}
	s.render(w, r, pr.Status, "problem", p)
}
