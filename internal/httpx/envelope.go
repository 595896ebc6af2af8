package httpx

import (
	"encoding/json"
	"net/http"

	"github.com/verdictgate/verdict/api"
)

// ReadError reads the contract's error envelope, {"error": {"code", "message"}}, from a refused
// answer's status and body, as a peer's WriteError wrote it. A body that is not an envelope
// gives an *Error with the status alone: the status still says whether the refusal is final.
func ReadError(status int, body []byte) *Error {
	var env api.ErrorBody
	e := &Error{Status: status}
	if json.Unmarshal(body, &env) == nil {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	}
	return e
}

// Final reports whether repeating the request unchanged cannot succeed: a 4xx answer, except
// 408 (Request Timeout) and 429 (Too Many Requests), which ask for a later retry.
func (e *Error) Final() bool {
	return e.Status >= 400 && e.Status < 500 &&
		e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
}
