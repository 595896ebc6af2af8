package mcpgate

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/askform"
)

// encodedState is a callState as the stores keep it. The preflight request is the wire type
// verdictd reads, read back with apijson like every api.Request; the form is the gateway's own,
// and so is a decided call that waits for the user to connect an account (its verdict and the
// arguments' exact bytes). One encoding serves every backend, so the bytes a bound counts are
// the bytes kept.
type encodedState struct {
	Principal  string          `json:"principal"`
	Exposed    string          `json:"exposed"`
	ArgsDigest string          `json:"args_digest"`
	Req        json.RawMessage `json:"req"`
	Form       *askform.Form   `json:"form"`
	Rounds     int             `json:"rounds"`
	Connect    *verdictCall    `json:"connect,omitempty"`
	Expiry     int64           `json:"expiry"` // unix nanoseconds
}

// encodeState returns st's stored form.
func encodeState(st *callState) ([]byte, error) {
	req, err := json.Marshal(&st.Req)
	if err != nil {
		return nil, fmt.Errorf("mcpgate: encode request: %w", err)
	}
	b, err := json.Marshal(encodedState{Principal: st.Principal, Exposed: st.Exposed, ArgsDigest: st.ArgsDigest,
		Req: req, Form: st.Form, Rounds: st.Rounds, Connect: st.Connect, Expiry: st.expiry.UnixNano()})
	if err != nil {
		return nil, fmt.Errorf("mcpgate: encode state: %w", err)
	}
	return b, nil
}

// decodeState reads what encodeState wrote.
func decodeState(b []byte) (*callState, error) {
	var e encodedState
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("mcpgate: decode state: %w", err)
	}
	st := &callState{Principal: e.Principal, Exposed: e.Exposed, ArgsDigest: e.ArgsDigest, Form: e.Form,
		Rounds: e.Rounds, Connect: e.Connect, expiry: time.Unix(0, e.Expiry)}
	if err := apijson.Unmarshal(e.Req, &st.Req); err != nil {
		return nil, fmt.Errorf("mcpgate: decode state request: %w", err)
	}
	if st.Form == nil && st.Connect == nil {
		return nil, fmt.Errorf("mcpgate: decode state: neither a form nor a decided call")
	}
	return st, nil
}

// decodeRelay reads a relayState as relayInputRequired stores it (its JSON).
func decodeRelay(b []byte) (*relayState, error) {
	var st relayState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("mcpgate: decode relay state: %w", err)
	}
	if len(st.IDs) == 0 {
		return nil, fmt.Errorf("mcpgate: decode relay state: no questions")
	}
	return &st, nil
}
