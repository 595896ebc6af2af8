package console

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/verdictgate/verdict/audit"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/replay"
)

// maxPolicyUpload bounds the policy file an admin uploads to the replay page, and the form
// that carries it.
const maxPolicyUpload = 1 << 20

// replayView is the replay page: the form, and the report of the replay it ran.
type replayView struct {
	File   string
	Report *replay.Report
}

// mayReplay reports whether the session may use the replay page, and answers 403 when it may
// not: only admin_groups' members may, and with none configured nobody does.
func (s *Server) mayReplay(w http.ResponseWriter, r *http.Request, sess session) bool {
	if len(s.cfg.AdminGroups) > 0 && sess.inGroup(s.cfg.AdminGroups) {
		return true
	}
	s.renderProblemAs(w, r, sess, problem{Status: http.StatusForbidden, Code: codeNotAdmin, Words: words(codeNotAdmin, "")})
	return false
}

func (s *Server) handleReplayForm(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.mayReplay(w, r, sess) {
		return
	}
	s.render(w, r, http.StatusOK, "replay", signedIn(sess, "Replay", &replayView{}))
}

// handleReplay decides verdictd's records again under the policy uploaded, and shows what
// would change. Nothing is kept: the policy is read, used and dropped.
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request, sess session) {
	if !s.mayReplay(w, r, sess) {
		return
	}
	v := &replayView{}
	fail := func(status int, code, details string) {
		s.render(w, r, status, "replay", signedInWith(sess, "Replay", v, &problem{Status: status, Code: code, Words: words(code, ""), Details: details}))
	}
	f, fh, err := r.FormFile("policy")
	if err != nil {
		fail(http.StatusBadRequest, codeBadForm, "choose a policy file")
		return
	}
	defer f.Close()
	v.File = fh.Filename
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyUpload+1))
	switch {
	case err != nil:
		fail(http.StatusBadRequest, codeBadForm, "")
		return
	case len(data) > maxPolicyUpload:
		fail(http.StatusRequestEntityTooLarge, codePolicyTooLarge, fmt.Sprintf("at most %d bytes", maxPolicyUpload))
		return
	}
	pol, err := policy.Parse(data)
	if err != nil {
		// The error names the line and column in the file uploaded.
		fail(http.StatusBadRequest, codePolicyInvalid, err.Error())
		return
	}
	rp, err := replay.New(pol)
	if err == nil {
		v.Report, err = rp.Run(r.Context(), []audit.Source{s.replaySource}, replay.Options{})
	}
	if err != nil {
		v.Report = nil
		s.log.Warn("replay", "error", err.Error(), "subject", sess.Subject)
		details := ""
		if se, ok := errors.AsType[*audit.SourceError](err); ok {
			details = se.Error()
		}
		fail(http.StatusBadGateway, codeReplayFailed, details)
		return
	}
	s.log.Info("replay", "subject", sess.Subject, "policy_version", pol.Version, "records", v.Report.Records, "changed", v.Report.Changed)
	s.render(w, r, http.StatusOK, "replay", signedIn(sess, "Replay", v))
}
