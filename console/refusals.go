package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
)

// The console's own refusal codes, beside verdictd's (docs/console.md lists both).
const (
	codeCSRF           = "csrf_token_invalid"
	codeOrigin         = "origin_mismatch"
	codeSessionEnded   = "session_ended"
	codeTokenExpired   = "access_token_expired"
	codeBadForm        = "bad_form"
	codeUnavailable    = "verdictd_unavailable"
	codeBadAnswer      = "verdictd_bad_answer"
	codeSignInFailed   = "sign_in_failed"
	codeSignInExpired  = "sign_in_expired"
	codeAuditFailed    = "audit_failed"
	codeRecordNotFound = "record_not_found"
	codeNotAuditor     = "not_an_auditor"

	// The replay page's: the user is in none of admin_groups, the policy uploaded does not
	// load or is past its bound, or the records could not be read to their end.
	codeNotAdmin       = "not_an_admin"
	codePolicyInvalid  = "policy_invalid"
	codePolicyTooLarge = "policy_too_large"
	codeReplayFailed   = "replay_failed"

	// The connections page's: the executor's grants API could not be read, refused the
	// console, or holds no grant of the user at the server a revocation names.
	codeExecutorUnavailable = "executor_unavailable"
	codeExecutorRefused     = "executor_refused"
	codeConnectionNotFound  = "connection_not_found"

	// The sign-ins in progress are bounded, in all and per client address (docs/console.md);
	// a sign-in past a bound is refused, 429, and none already started is pushed out.
	codeSignInLimit       = "sign_in_limit"
	codeSignInClientLimit = "sign_in_client_limit"

	// The session store (etcd) did not answer: no session is accepted that cannot be checked,
	// and no sign-in or sign-out is said to be done that was not stored.
	codeSessionStoreUnavailable = "session_store_unavailable"
)

// problem is a refusal as a page shows it: in words, with its code, and the status the page is
// answered with.
type problem struct {
	Status  int
	Code    string
	Words   string
	Details string // verdictd's or the provider's own message, when there is one
}

// words says what a refusal code of verdictd's approvals API (or the console's) means to the
// approver. group is the approval's group, for approver_not_in_group.
func words(code, group string) string {
	if code == api.CodeApproverNotInGroup && group != "" {
		return fmt.Sprintf("Your account is not in the group %q, which decides this tool's approvals.", group)
	}
	if w, ok := refusalWords[code]; ok {
		return w
	}
	return "verdictd refused the request."
}

// refusalWords say what the refusal codes of verdictd's approvals API, then the console's own,
// mean to the approver.
var refusalWords = map[string]string{
	api.CodeUnauthorized:          "verdictd did not accept your sign-in: your access token is missing, expired or not issued for verdictd. Sign in again.",
	api.CodeSelfApproval:          "Four eyes: this is your own call, so someone else must approve or deny it.",
	api.CodeApproverNotInGroup:    "Your account is not among the approvers of this tool's calls.",
	api.CodeChannelNotAllowed:     "This tool's approvals cannot be given in the console: they are given in the MCP host, or by the organisation's approval system.",
	api.CodeNotFound:              "There is no such approval. It may have been removed, or the link is wrong.",
	api.CodeAlreadyDecided:        "This approval has already been decided.",
	api.CodeApprovalValueMismatch: "The values have changed since this page was shown (or the page is stale). Nothing was decided: review the call again.",
	api.CodeApprovalExpired:       "This approval expired before it was decided. Nothing will run; the call must be made again.",
	api.CodeStoreUnavailable:      "verdictd could not reach the store that keeps the approvals. Nothing was decided; try again in a moment.",
	api.CodeShuttingDown:          "verdictd is restarting. Nothing was decided; try again in a moment.",
	api.CodeGrantUnreadable:       "One of your connected accounts is stored at the executor in a form that does not open (changed or moved in its file), so none is listed rather than some. It is never used. The details name its server: connect that account again, which replaces it, or have it revoked.",
	codeCSRF:                      "The form was not accepted: it did not carry this session's form token. Reload the page and try again.",
	codeOrigin:                    "The form was not accepted: it was not sent from this console's own pages.",
	codeSessionEnded:              "Your session has ended. Sign in again.",
	codeSessionStoreUnavailable:   "The console cannot reach the store that keeps its sign-ins, so it cannot check yours. Nothing was done; try again in a moment.",
	codeTokenExpired:              "Your sign-in has expired, so nothing was sent to verdictd. Sign in again and review the call.",
	codeBadForm:                   "The form was incomplete or malformed. Nothing was decided.",
	codeUnavailable:               "verdictd could not be reached. Nothing was decided; try again in a moment.",
	codeBadAnswer:                 "verdictd answered something the console does not understand. Nothing is shown rather than a guess.",
	codeSignInFailed:              "Sign-in failed.",
	codeSignInExpired:             "This sign-in attempt is unknown or has expired. Start again.",
	codeSignInLimit:               "The console is holding as many unfinished sign-ins as it may, so no new one can start now. Sign-ins already started are not affected; try again in a few minutes.",
	codeSignInClientLimit:         "Too many sign-ins were started from your network address and not finished. Finish one that is open, or try again in a few minutes, once they have expired.",
	codeAuditFailed:               "The audit could not be completed: a report on part of the records could call an anomaly clean, so none is shown.",
	codeRecordNotFound:            "There is no record with this id.",
	codeNotAuditor:                "The audit view is open to the console's auditor groups only, and your account is in none of them.",
	codeNotAdmin:                  "The replay page is open to the console's admin groups only, and your account is in none of them.",
	codePolicyInvalid:             "The policy file does not load; the details say where. Nothing was replayed.",
	codePolicyTooLarge:            "The policy file is larger than the console takes. Nothing was replayed.",
	codeReplayFailed:              "verdictd's records could not be read to their end: a replay of part of them could miss a change, so none is shown.",
	codeExecutorUnavailable:       "The executor could not be reached, or answered something the console does not understand. Nothing was changed; try again in a moment.",
	codeExecutorRefused:           "The executor refused the console's request; the details say why. Nothing was changed.",
	codeConnectionNotFound:        "You have no account connected at this server: it may have been revoked already. Nothing was changed.",
}

// refusal turns an error of the approvals API into the problem a page shows.
func refusal(ctx context.Context, err error, group string) problem {
	var he *httpx.Error
	switch {
	case errors.As(err, &he):
		status := he.Status
		if status < 400 || status > 599 {
			status = http.StatusBadGateway
		}
		return problem{Status: status, Code: he.Code, Words: words(he.Code, group), Details: he.Message}
	case errors.Is(err, errBadAnswer):
		return problem{Status: http.StatusBadGateway, Code: codeBadAnswer, Words: words(codeBadAnswer, "")}
	case ctx.Err() != nil:
		return problem{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Words: words(codeUnavailable, "")}
	default:
		return problem{Status: http.StatusBadGateway, Code: codeUnavailable, Words: words(codeUnavailable, "")}
	}
}

// refusalReason says in words why may_decide is false.
func refusalReason(a *approval) string {
	switch {
	case a.Refusal != "":
		return words(a.Refusal, a.Group) + " (" + a.Refusal + ")"
	case a.State != api.ApprovalPending:
		return "This approval is " + a.State + "."
	}
	return "verdictd says you may not decide this approval."
}
