package mcpgate

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/askform"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func testClaims(now time.Time) StateClaims {
	return StateClaims{Principal: "u_01", Tool: "bank.transfer", ArgsDigest: "sha256:ab",
		QuestionIDs: []string{"q_1"}, Expiry: now.Add(time.Minute).Unix(), Nonce: "n0nce"}
}

func TestStateRoundTrip(t *testing.T) {
	c, err := NewStateCodec(testKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	want := testClaims(now)
	tok, err := c.Seal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Open(tok, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Nonce != want.Nonce || got.Principal != want.Principal || got.Expiry != want.Expiry {
		t.Errorf("opened %+v, want %+v", got, want)
	}
	if err := got.Check("u_01", "bank.transfer", "sha256:ab"); err != nil {
		t.Error(err)
	}
}

func TestStateRefusals(t *testing.T) {
	c, _ := NewStateCodec(testKey)
	other, _ := NewStateCodec([]byte("another key, also at least 32 bytes long"))
	now := time.Unix(1_800_000_000, 0)
	tok, _ := c.Seal(testClaims(now))
	parts := strings.Split(tok, ".")
	forgedPayload := func(mut func(*StateClaims)) string {
		cl := testClaims(now)
		mut(&cl)
		b, _ := json.Marshal(cl)
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
	}
	otherTok, _ := other.Seal(testClaims(now))
	expired := testClaims(now)
	expired.Expiry = now.Unix()
	expiredTok, _ := c.Seal(expired)
	v2 := func() string {
		payload := "v2." + parts[1]
		return payload + "." + base64.RawURLEncoding.EncodeToString(c.mac(payload))
	}()
	noNonce := testClaims(now)
	noNonce.Nonce = ""
	noNonceTok, _ := c.Seal(noNonce)

	for _, tc := range []struct {
		name string
		tok  string
		want error
	}{
		{"empty", "", ErrStateInvalid},
		{"no dots", "abc", ErrStateInvalid},
		{"mac truncated", tok[:len(tok)-2], ErrStateInvalid},
		{"mac padded", tok + "=", ErrStateInvalid},
		{"mac of another key", otherTok, ErrStateInvalid},
		{"principal rewritten", forgedPayload(func(c *StateClaims) { c.Principal = "u_02" }), ErrStateInvalid},
		{"expiry extended", forgedPayload(func(c *StateClaims) { c.Expiry += 3600 }), ErrStateInvalid},
		{"mac moved to payload", parts[0] + "." + parts[2] + "." + parts[1], ErrStateInvalid},
		{"unknown version under a valid mac", v2, ErrStateInvalid},
		{"no nonce", noNonceTok, ErrStateInvalid},
		{"too long", tok + strings.Repeat("A", maxStateLen), ErrStateInvalid},
		{"expired", expiredTok, ErrStateExpired},
	} {
		if _, err := c.Open(tc.tok, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestStateCheck(t *testing.T) {
	cl := testClaims(time.Now())
	for _, tc := range []struct{ name, p, tool, digest string }{
		{"principal", "u_02", "bank.transfer", "sha256:ab"},
		{"tool", "u_01", "bank.schedule_transfer", "sha256:ab"},
		{"arguments", "u_01", "bank.transfer", "sha256:cd"},
	} {
		if err := cl.Check(tc.p, tc.tool, tc.digest); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("%s: %v, want mismatch", tc.name, err)
		}
	}
}

func TestShortKeyRefused(t *testing.T) {
	if _, err := NewStateCodec(make([]byte, MinStateKeyBytes-1)); err == nil {
		t.Fatal("a 31-byte key was accepted")
	}
}

// FuzzOpenState feeds arbitrary tokens to Open: it must never panic, and
// nothing but the token this codec sealed may open, byte for byte (the MAC
// binds the payload, and both parts are strict base64url).
func FuzzOpenState(f *testing.F) {
	c, _ := NewStateCodec(testKey)
	now := time.Unix(1_800_000_000, 0)
	tok, _ := c.Seal(testClaims(now))
	f.Add(tok)
	f.Add(tok + "A")
	f.Add(tok[:len(tok)-1] + "B")
	f.Add(tok[:len(tok)-10] + "\n" + tok[len(tok)-10:]) // the decoder skips line breaks
	f.Add(tok[:len(tok)-10] + "\r" + tok[len(tok)-10:])
	f.Add("v1.e30.AAAA")
	f.Add("")
	f.Add("v1..")
	f.Fuzz(func(t *testing.T, s string) {
		cl, err := c.Open(s, now)
		if err != nil {
			if s == tok {
				t.Fatalf("the sealed token does not open: %v", err)
			}
			return
		}
		if s != tok {
			t.Fatalf("opened %q, which is not the sealed token %q", s, tok)
		}
		if !reflect.DeepEqual(cl, testClaims(now)) {
			t.Fatalf("opened to %+v, sealed %+v", cl, testClaims(now))
		}
	})
}

func BenchmarkStateSealOpen(b *testing.B) {
	c, _ := NewStateCodec(testKey)
	now := time.Unix(1_800_000_000, 0)
	cl := testClaims(now)
	b.ReportAllocs()
	for b.Loop() {
		tok, err := c.Seal(cl)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Open(tok, now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStateEncodingRoundTrip: a continuation read back from its stored bytes is the one
// stored, segments and form included.
func TestStateEncodingRoundTrip(t *testing.T) {
	seg := api.Segment{Text: strings.Repeat("send 1000 to Bob. ", 100), Trust: "user"}
	f, err := askform.Build(&api.Record{Questions: []api.Question{
		{QuestionID: "q_1", SlotID: "amount", Kind: "value", Message: "How much?", Schema: json.RawMessage(`{"type":"number"}`)},
	}}, "immediate", 0)
	if err != nil {
		t.Fatal(err)
	}
	st := &callState{Principal: "u_01", Exposed: "bank.transfer", ArgsDigest: "sha256:ab", Rounds: 2,
		Req:    api.Request{Principal: "u_01", Server: "bank", Tool: "transfer", ConversationID: "c1"},
		Form:   f,
		expiry: time.Unix(1_800_000_000, 5)}
	st.Req.Instruction.Segments = []api.Segment{seg}
	st.Req.Candidates = []api.Candidate{{Field: "amount", Value: json.RawMessage(`1000.50`)}}
	b, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < len(seg.Text) {
		t.Fatalf("encoded %d bytes, less than its segment's %d: the bound would not count it", len(b), len(seg.Text))
	}
	got, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := encodeState(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(b) {
		t.Fatalf("re-encoded differs:\n%s\n%s", b, again)
	}
	a, err := got.Form.Answers(map[string]any{"amount": 1000.5})
	if err != nil || len(a.User) != 1 || a.User[0].QuestionID != "q_1" {
		t.Fatalf("the decoded form reads %+v, %v", a, err)
	}
	if !got.expiry.Equal(st.expiry) || got.Req.Instruction.Segments[0].Text != seg.Text {
		t.Fatalf("decoded %+v", got)
	}
}

// TestStateDecodesStoredContinuation: a continuation stored by an earlier version, in the
// bytes it wrote, is read back to the call it holds and the form it showed, and written again
// as the same bytes: a new version of the gateway reads what waits in a shared store.
func TestStateDecodesStoredContinuation(t *testing.T) {
	const stored = `{"principal":"u_01","exposed":"bank.transfer","args_digest":"sha256:ab","req":{"principal":"u_01",` +
		`"conversation_id":"c1","server":"bank","tool":"transfer","instruction":[{"text":"send 1000 to Bob","trust":"user"}]},` +
		`"form":{"Message":"Before this goes ahead, please answer the following.\nConfirm. (110-222-333)","Fields":[` +
		`{"Key":"amount","Kind":"value","QuestionID":"q_1","Value":null,"Options":null,"Labels":null,` +
		`"Property":{"minimum":1,"title":"How much?","type":"integer"},"Optional":false,"NewKey":""},` +
		`{"Key":"confirm_to","Kind":"approval","QuestionID":"q_2","Value":"110-222-333","Options":null,"Labels":null,` +
		`"Property":{"description":"Approve: 110-222-333","title":"Confirm.","type":"boolean"},"Optional":false,"NewKey":""}]},` +
		`"rounds":2,"expiry":1800000000000000005}`
	st, err := decodeState([]byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := encodeState(st); err != nil || string(b) != stored {
		t.Fatalf("written again as\n%s\nwant\n%s (%v)", b, stored, err)
	}
	p := st.Form.Params()
	if !strings.HasSuffix(p.Message, "\nConfirm. (110-222-333)") || !st.Form.AsksApproval() {
		t.Errorf("the stored form asks %q", p.Message)
	}
	if err := st.answer(map[string]any{"amount": float64(12), "confirm_to": true}); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st.Req.UserAnswers)
	const want = `[{"question_id":"q_1","value":12},{"question_id":"q_2","value":"110-222-333","approved":true}]`
	if string(got) != want || st.Principal != "u_01" || st.Rounds != 2 || st.expiry.UnixNano() != 1800000000000000005 {
		t.Errorf("decoded %+v, answers %s", st, got)
	}
}
