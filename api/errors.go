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
}
