package api

// ErrorBody is the body of every non-2xx answer of verdictd and the executor:
// {"error": {"code", "message"}}. The code is stable and meant for programs; the message is
// for people.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what an ErrorBody says.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// ConnectURL is the page where the user connects an account at the tool's server: set by
	// the executor on a credential_required refusal of a user_grant server, which the gateway
	// shows the user (docs/credentials.md#connecting-an-account).
	ConnectURL string `json:"connect_url,omitempty"`
}
