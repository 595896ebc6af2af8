package executor

import (
	"errors"

	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/internal/strictjson"
)

// errNotRead refuses a body the hand-written request reader does not decode itself.
var errNotRead = errors.New("executor: request not read by the fast decoder")

// decodeExecuteRequest decodes body into req exactly as httpx.DecodeStrict does, errors
// included. A well-formed body of the usual shape is read in one pass without reflection; any
// other body goes to httpx.DecodeStrict, whose answer stands.
func decodeExecuteRequest(body []byte, req *ExecuteRequest) error {
	if readExecuteRequest(body, req) {
		return nil
	}
	*req = ExecuteRequest{}
	return httpx.DecodeStrict(body, req)
}

// readExecuteRequest reads a body that is one object with at most one "verdict" member, a
// string, and at most one "arguments" member, an object, named exactly so once unescaped (as
// encoding/json reads "ver\u0064ict" too). It reports false on anything else (a null, a value
// of another type, a member name in another case, an unknown or repeated member, a string the
// Reader does not unescape, trailing data), leaving req garbage: the fast path only ever
// accepts, never refuses.
//
// Arguments is a slice of body, not a copy as encoding/json's: the handler never writes to body.
func readExecuteRequest(body []byte, req *ExecuteRequest) bool {
	rd := strictjson.NewReader(body)
	rd.Object()
	var haveVerdict, haveArgs bool
	for {
		name, ok := rd.Member()
		if !ok {
			break
		}
		switch string(name) {
		case "verdict":
			if haveVerdict {
				rd.Fail(errNotRead)
				break
			}
			haveVerdict = true
			req.Verdict = rd.Str()
		case "arguments":
			if haveArgs || rd.Peek() != '{' {
				rd.Fail(errNotRead)
				break
			}
			haveArgs = true
			req.Arguments = rd.Raw()
		default:
			rd.Fail(errNotRead)
		}
	}
	rd.End()
	return rd.Err() == nil
}
