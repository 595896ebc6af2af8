package mcpgate

import (
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// console_url is an http(s) URL the approver's browser opens: plain http only on loopback,
// and nothing a link could smuggle in (a query, a fragment, credentials).
func TestConsoleURLIsValidated(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"", true}, {"https://console.example", true}, {"https://console.example/verdict/", true},
		{"http://127.0.0.1:8795", true}, {"http://console.example", false}, {"ftp://console.example", false},
		{"https://console.example/?next=x", false}, {"https://console.example/#a", false},
		{"https://user:pw@console.example", false}, {"console.example", false},
	} {
		cfg := Config{Policy: "p", StateKeyFile: "k", Principals: map[string]Principal{"u": {}},
			Verdictd: Endpoint{URL: "http://x", Token: "t"}, Executor: Endpoint{URL: "http://x", Token: "t"}, ConsoleURL: tt.url}
		err := cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "console_url")) {
			t.Errorf("console_url %q: Validate = %v", tt.url, err)
		}
	}
}

// Which records wait on the console: a pending approval whose tool takes none in the host,
// or any pending approval when the host cannot be asked with a form.
func TestConsoleApprovalChoice(t *testing.T) {
	pending := func(channels ...string) *api.Record {
		return &api.Record{Approval: &api.RecordApproval{ApprovalID: "apr_X", State: api.ApprovalPending, Channels: channels}}
	}
	for _, tt := range []struct {
		name      string
		rec       *api.Record
		hostForms bool
		want      bool
	}{
		{"no approval", &api.Record{}, true, false},
		{"console only", pending("console"), true, true},
		{"host and console, a host with forms", pending("host", "console"), true, false},
		{"host and console, a host without forms", pending("host", "console"), false, true},
		{"decided", &api.Record{Approval: &api.RecordApproval{ApprovalID: "apr_X", State: api.ApprovalApproved, Channels: []string{"console"}}}, true, false},
		{"no id", &api.Record{Approval: &api.RecordApproval{State: api.ApprovalPending, Channels: []string{"console"}}}, true, false},
	} {
		if got := consoleApproval(tt.rec, tt.hostForms) != nil; got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The message says what is to be approved, by whom and where, in one sentence each, with the
// question's invisible characters shown.
func TestApprovalMessage(t *testing.T) {
	rec := &api.Record{Questions: []api.Question{{Kind: api.QuestionReviewDraft, Message: "Review the memo."},
		{Kind: api.QuestionApproval, Message: "Please confirm the account\u202e to credit."}}}
	got := approvalMessage(rec, &api.RecordApproval{Channels: []string{"console"}}, "Open the page.")
	want := "This request must be approved by an approver of your organisation before it runs " +
		"(Please confirm the account⟦U+202E⟧ to credit). Open the page."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// A webhook-only approval is given by a system, not by a person the user could ask.
	got = approvalMessage(&api.Record{}, &api.RecordApproval{Channels: []string{"webhook"}}, "Wait.")
	if want := "This request must be approved by your organisation's approval system before it runs. Wait."; got != want {
		t.Errorf("webhook only: got %q\nwant %q", got, want)
	}
}
