package console

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/gates"
	"github.com/verdictgate/verdict/internal/offline"
	"github.com/verdictgate/verdict/policy"
	"github.com/verdictgate/verdict/store"
)

// addCaptured decides a transfer of the example policy with capture, as verdictd does with
// records.capture_requests on, and stores its record in the stub verdictd.
func (s *stubVerdictd) addCaptured(t *testing.T, principal string, at time.Time) string {
	t.Helper()
	pol, err := policy.Load(filepath.Join("..", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "examples", "bank", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tools []gates.Tool
	if err := json.Unmarshal(b, &tools); err != nil {
		t.Fatal(err)
	}
	var tool gates.Tool
	for _, x := range tools {
		if x.Name == "transfer" {
			tool = x
		}
	}
	eng, err := offline.NewEngine(func() time.Time { return at }, gates.RandomIDs{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"principal": principal, "server": "bank", "tool": "transfer",
		"instruction": []map[string]any{{"text": "send money: 500,000 won", "trust": "user"}},
		"intent":      map[string]any{"when_case": "immediate", "action_name": map[string]any{"segment": 0, "span": []int{0, 10}}},
		"candidates":  []map[string]any{{"field": "amount", "segment": 0, "span": []int{12, 19}, "value": 500000}}})
	req, err := gates.DecodeRequest(body, gates.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in, capture := eng.Capture(gates.Input{Tool: tool, Policy: pol, Request: req, State: gates.NewMemState()})
	rec, err := eng.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	c, err := capture.Result(req, tool, at)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := apijson.AppendRecord(nil, rec)
	if err == nil {
		stored, err = apijson.AppendCapture(stored, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	meta := store.DecisionMeta{RecordID: rec.RecordID, ActionKey: *rec.ActionKey, Outcome: rec.Outcome, Time: at}
	if err := s.db.Decisions().Append(context.Background(), meta, stored); err != nil {
		t.Fatal(err)
	}
	return rec.RecordID
}

// upload posts a policy file to the replay page as the page's form does.
func (h *harness) upload(c *http.Cookie, csrf, name string, content []byte) response {
	h.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if csrf != "" {
		mw.WriteField("csrf_token", csrf)
	}
	fw, _ := mw.CreateFormFile("policy", name)
	fw.Write(content)
	mw.Close()
	req, err := http.NewRequestWithContext(h.t.Context(), "POST", h.srv.URL+"/replay", &body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", "null")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestReplayPage: an admin uploads a candidate policy and sees, read-only and escaped, the
// replay of verdictd's records under it; everyone else is refused, as is a form without the
// session's token, a policy that does not load and one past the bound.
func TestReplayPage(t *testing.T) {
	h := newHarness(t, testIssuer, func(c *Config) { c.AdminGroups = []string{"policy-admins"} })
	records(t, h)
	id := h.stub.addCaptured(t, "<b>u_01</b>", h.clock.Now().Add(-time.Minute))
	example, err := os.ReadFile(filepath.Join("..", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	read := bytes.Replace(example, []byte("  bank/transfer:\n    class: irreversible"), []byte("  bank/transfer:\n    class: read"), 1)

	auditor := h.signIn("id3", "auditors")
	for _, r := range []response{h.do("GET", "/replay", auditor, nil, nil), h.upload(auditor, h.csrf(auditor), "p.yaml", read)} {
		if r.status != 403 || !strings.Contains(r.body, codeNotAdmin) {
			t.Errorf("a user outside admin_groups: %d\n%s", r.status, r.body)
		}
	}

	admin := h.signIn("id4", "policy-admins")
	if r := h.do("GET", "/replay", admin, nil, nil); r.status != 200 || !strings.Contains(r.body, `enctype="multipart/form-data"`) {
		t.Fatalf("the form: %d\n%s", r.status, r.body)
	}
	tests := []struct {
		name   string
		csrf   string
		file   []byte
		status int
		shown  []string
	}{
		{"the policy in force", h.csrf(admin), example, 200,
			[]string{"4 records, 1 replayed, 3 not replayable", "no outcome changes", "<code>bank/transfer</code>"}},
		{"the transfer reclassified as a read", h.csrf(admin), read, 200,
			[]string{"1 calls change their outcome", `href="/audit/records/` + id + `"`, "now_allowed", "&lt;b&gt;u_01&lt;/b&gt;", "not_gated"}},
		{"no form token", "", read, 403, []string{codeCSRF}},
		{"a policy that does not load", h.csrf(admin), []byte("policy_version: x\nservers: {}\ntools:\n  bank/x: {class: sometimes}\n"), 400,
			[]string{codePolicyInvalid, "line 4"}},
		{"a policy past the bound", h.csrf(admin), bytes.Repeat([]byte("#"), maxPolicyUpload+1), 413, []string{codePolicyTooLarge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.upload(admin, tt.csrf, "candidate.yaml", tt.file)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d\n%s", r.status, tt.status, r.body)
			}
			for _, want := range tt.shown {
				if !strings.Contains(r.body, want) {
					t.Errorf("the page does not show %q:\n%s", want, r.body)
				}
			}
			if strings.Contains(r.body, "<b>u_01") {
				t.Error("a principal is written unescaped")
			}
		})
	}
}
