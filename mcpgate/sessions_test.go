package mcpgate

import "testing"

// TestLegacyInitialize: only one initialize offering a revision before
// 2026-07-28 opens a session; a 2026-07-28 or later initialize, any other
// request, a batch and what does not parse are left to the stateless
// handler.
func TestLegacyInitialize(t *testing.T) {
	for _, tc := range []struct {
		body    string
		session bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, true},
		{`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2027-01-01"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"protocolVersion":"2025-06-18"}}`, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}]`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"`, false},
		// Escaped names and values are read as the library reads them.
		{`{"jsonrpc":"2.0","id":1,"method":"\u0069nitialize","params":{"protocolVersion":"2025-06-18"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","par\u0061ms":{"protocolVersion":"2025-06-18"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bank.get_balance","arguments":{"account":"1"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"initialize"}}`, false},
	} {
		if _, _, got := legacyInitialize([]byte(tc.body)); got != tc.session {
			t.Errorf("%s: session %v, want %v", tc.body, got, tc.session)
		}
	}
}
