package verdictd

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/gates"
)

// TestCaptureRequests: with records.capture_requests the stored record keeps what its
// preflight decided from — the request as decoded, the tool's definition, the questions its
// answers named — and the response never holds it; a masked read masks it whole; without the
// option nothing is kept.
func TestCaptureRequests(t *testing.T) {
	for _, capture := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[capture], func(t *testing.T) {
			e := newEnv(t, envOpts{mutate: func(c *Config) { c.Records.CaptureRequests = capture }})
			r := e.issue(context.Background())
			if strings.Contains(string(r.raw), `"capture"`) {
				t.Fatalf("the response holds a capture:\n%s", r.raw)
			}
			status, stored := do(t, "GET", e.srv.URL+"/v1/records/"+r.RecordID, adminToken, "", nil)
			if status != http.StatusOK {
				t.Fatalf("get record: %d %s", status, stored)
			}
			var got struct {
				Capture *api.Capture `json:"capture"`
			}
			if err := json.Unmarshal(stored, &got); err != nil {
				t.Fatal(err)
			}
			if !capture {
				if got.Capture != nil {
					t.Fatalf("a capture was kept with the option off:\n%s", stored)
				}
				return
			}
			c := got.Capture
			if c == nil {
				t.Fatalf("no capture kept:\n%s", stored)
			}
			req, err := gates.DecodeRequest(c.Request, gates.Limits{})
			if err != nil {
				t.Fatalf("the captured request does not decode: %v\n%s", err, c.Request)
			}
			if req.Principal != "u_01" || req.Tool != "transfer" || len(req.UserAnswers) != 2 {
				t.Errorf("captured request %+v", req)
			}
			var tool gates.Tool
			if err := json.Unmarshal(c.Tool, &tool); err != nil || tool.Name != "transfer" || tool.InputSchema == nil {
				t.Errorf("captured tool %s: %v", c.Tool, err)
			}
			if len(c.Questions) != 2 || !c.Questions[0].Found || !c.Questions[1].Found {
				t.Errorf("captured questions %+v", c.Questions)
			}
			if c.Now == "" {
				t.Error("no time captured")
			}
			// The record before the capture is the response, byte for byte.
			if i := strings.Index(string(stored), `,"capture":`); i < 0 || string(stored[:i])+"}" != string(r.raw) {
				t.Errorf("stored record without its capture differs from the response:\n%s\n%s", stored, r.raw)
			}
			_, masked := do(t, "GET", e.srv.URL+"/v1/records/"+r.RecordID+"?mask=1", adminToken, "", nil)
			if !strings.Contains(string(masked), `"capture":"***"`) || strings.Contains(string(masked), "landlord") {
				t.Errorf("masked record:\n%s", masked)
			}
		})
	}
}
