package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
)

// An approval is one pending gated call as verdictd's approvals API sends it (api.Approval),
// read into a type of the console's own for one reason: arguments, slot values and drafts keep
// their JSON exactly as verdictd sent it, so the page shows what would run byte for byte, never
// a decoding and re-encoding (which could turn 900.10 into 900.1). TestReadsAPIApproval keeps
// the two in step.
type approval struct {
	ApprovalID      string                    `json:"approval_id"`
	State           string                    `json:"state"`
	RecordID        string                    `json:"record_id"`
	Principal       string                    `json:"principal"`
	Server          string                    `json:"server"`
	Tool            string                    `json:"tool"`
	Arguments       map[string]jsontext.Value `json:"arguments"`
	ArgumentsDigest string                    `json:"arguments_digest"`
	Slots           []approvalSlot            `json:"slots"`
	Drafts          []approvalDraft           `json:"drafts"`
	Notices         []string                  `json:"notices"`
	FourEyes        bool                      `json:"four_eyes"`
	Group           string                    `json:"group"`
	CreatedAt       time.Time                 `json:"created_at"`
	ExpiresAt       time.Time                 `json:"expires_at"`
	DecidedBy       string                    `json:"decided_by"`
	DecidedAt       time.Time                 `json:"decided_at"`
	// UseBy is when an approved approval lapses if no preflight used it.
	UseBy time.Time `json:"use_by"`
	// WebhookHost and DecisionReason come with a decision the tool's approval webhook gave.
	WebhookHost    string `json:"webhook_host"`
	DecisionReason string `json:"decision_reason"`
	MayDecide      bool   `json:"may_decide"`
	Refusal        string `json:"refusal"`
}

type approvalSlot struct {
	SlotID   string         `json:"slot_id"`
	Question string         `json:"question"`
	Value    jsontext.Value `json:"value"`
}

type approvalDraft struct {
	Field string `json:"field"`
	// Text is the drafted text, a JSON string; anything else is shown as the JSON it is.
	Text   jsontext.Value `json:"text"`
	Digest string         `json:"digest"`
	Bytes  int64          `json:"bytes"`
}

// approvalIDPattern is what an approval id may be before it is put in a URL: the contract's ids
// are opaque, and anything else is not one.
var approvalIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// digestPattern is a sha256 digest as verdictd writes it.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// errBadAnswer: verdictd answered something that is not the contract's.
var errBadAnswer = errors.New("verdictd's answer is not an approval")

// approvalsAPI calls verdictd's approvals API with the approver's own access token.
type approvalsAPI struct {
	base   *url.URL
	client *http.Client
}

func newApprovalsAPI(base string, client *http.Client) (*approvalsAPI, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("verdictd.url: %w", err)
	}
	return &approvalsAPI{base: u, client: client}, nil
}

// maxAnswer bounds an answer of the approvals API: 200 approvals, each with its arguments and
// drafts in full.
const maxAnswer = 64 << 20

// pending lists the pending approvals, newest first.
func (a *approvalsAPI) pending(ctx context.Context, token string) ([]approval, error) {
	var out struct {
		Approvals []approval `json:"approvals"`
	}
	if err := a.do(ctx, http.MethodGet, "/v1/approvals", url.Values{"state": {api.ApprovalPending}}, token, nil, &out); err != nil {
		return nil, err
	}
	return out.Approvals, nil
}

// get reads one approval.
func (a *approvalsAPI) get(ctx context.Context, token, id string) (*approval, error) {
	var out approval
	if err := a.do(ctx, http.MethodGet, "/v1/approvals/"+url.PathEscape(id), nil, token, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// decide posts the approver's decision on the call whose arguments digest the approver saw.
func (a *approvalsAPI) decide(ctx context.Context, token, id, decision, digest string) (*approval, error) {
	body, err := json.Marshal(map[string]string{"decision": decision, "arguments_digest": digest})
	if err != nil {
		return nil, err
	}
	var out approval
	if err := a.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id), nil, token, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// do sends one request. A refusal is an *httpx.Error with verdictd's status and code; a
// transport failure or an answer that is not the contract's is another error.
func (a *approvalsAPI) do(ctx context.Context, method, path string, q url.Values, token string, body []byte, out any) error {
	u := *a.base
	u.Path += path
	u.RawPath = ""
	if q != nil {
		u.RawQuery = q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("%s %s: %w: larger than %d bytes", method, path, errBadAnswer, maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		e := httpx.ReadError(resp.StatusCode, data)
		e.Code = cmp.Or(e.Code, fmt.Sprintf("http_%d", resp.StatusCode))
		return e
	}
	if err := jsonv2.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w: %v", method, path, errBadAnswer, err)
	}
	return nil
}
