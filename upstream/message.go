package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxExactID bounds numeric ids to those a float64 (through which
// jsonrpc.MakeID takes them) holds exactly.
const maxExactID = 1 << 53

// maxNesting is the deepest nesting of objects and arrays a message may
// have, counting the message itself, as in the SDK's decoder.
const maxNesting = 1000

// messageOptions read a line strictly: a member that is not exactly one of
// the envelope's names, or is there twice, is refused. Invalid UTF-8 in a
// string becomes U+FFFD, as the SDK's decoder reads it.
var messageOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsontext.AllowInvalidUTF8(true),
)

// wireMessage is a JSON-RPC 2.0 message as read: every member raw, so that
// an absent member, a null one and one of the wrong type are told apart.
type wireMessage struct {
	JSONRPC jsontext.Value `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Method  jsontext.Value `json:"method"`
	Params  jsontext.Value `json:"params"`
	Result  jsontext.Value `json:"result"`
	Error   jsontext.Value `json:"error"`
}

// wireError is a JSON-RPC error object as read.
type wireError struct {
	Code    *int64         `json:"code"`
	Message *string        `json:"message"`
	Data    jsontext.Value `json:"data"`
}

// decodeMessage decodes one JSON-RPC 2.0 message. It accepts what the
// SDK's decoder accepts and refuses more: batches (the protocol has none
// since 2025-06-18), members it does not know or finds twice, member
// names in another case, ids that are not strings or integers, a
// response with both or neither of result and error, a request with a
// result or error, and an error object without an integer code and a
// string message. The params, result and error data are copies; data is
// not retained.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	data = bytes.Trim(data, " \t\r\n")
	if len(data) > 0 && data[0] == '[' {
		return nil, fmt.Errorf("%w: batches are not supported", errInvalidMessage)
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", errInvalidMessage)
	}
	if nestsTooDeep(data) {
		return nil, fmt.Errorf("%w: nested deeper than %d levels", errInvalidMessage, maxNesting)
	}
	var w wireMessage
	if err := jsonv2.Unmarshal(data, &w, messageOptions); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidMessage, err)
	}
	if v, ok := stringValue(w.JSONRPC); !ok || v != "2.0" {
		return nil, fmt.Errorf("%w: jsonrpc must be \"2.0\"", errInvalidMessage)
	}
	if w.Error.Kind() == 'n' {
		w.Error = nil // the SDK reads a null error as none
	}
	var id jsonrpc.ID
	if w.ID != nil {
		var err error
		if id, err = decodeID(w.ID); err != nil {
			return nil, fmt.Errorf("%w: %w", errInvalidMessage, err)
		}
	}
	if w.Method != nil {
		if w.Result != nil || w.Error != nil {
			return nil, fmt.Errorf("%w: a request with a result or error", errInvalidMessage)
		}
		m, ok := stringValue(w.Method)
		if !ok {
			return nil, fmt.Errorf("%w: method must be a string", errInvalidMessage)
		}
		return &jsonrpc.Request{ID: id, Method: m, Params: json.RawMessage(w.Params)}, nil
	}
	switch {
	case w.ID == nil:
		return nil, fmt.Errorf("%w: neither a request nor a response with an id", errInvalidMessage)
	case w.Params != nil:
		return nil, fmt.Errorf("%w: a response with params", errInvalidMessage)
	case (w.Result == nil) == (w.Error == nil):
		return nil, fmt.Errorf("%w: a response needs exactly one of result and error", errInvalidMessage)
	}
	resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(w.Result)}
	if w.Error != nil {
		e, err := decodeError(w.Error)
		if err != nil {
			return nil, fmt.Errorf("%w: error: %w", errInvalidMessage, err)
		}
		resp.Error = e
	}
	return resp, nil
}

// decodeID reads a string or an integer id. null, fractions, exponents
// and integers beyond 2^53 are refused rather than coerced.
func decodeID(v jsontext.Value) (jsonrpc.ID, error) {
	if s, ok := stringValue(v); ok {
		return jsonrpc.MakeID(s)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if v.Kind() != '0' || err != nil || n > maxExactID || n < -maxExactID {
		return jsonrpc.ID{}, fmt.Errorf("id %.40s is not a string or an integer", v)
	}
	return jsonrpc.MakeID(float64(n))
}

// decodeError reads a JSON-RPC error object.
func decodeError(v jsontext.Value) (*jsonrpc.Error, error) {
	if v.Kind() != '{' {
		return nil, errors.New("not an object")
	}
	var w wireError
	if err := jsonv2.Unmarshal(v, &w, messageOptions); err != nil {
		return nil, err
	}
	switch {
	case w.Code == nil:
		return nil, errors.New("no integer code")
	case w.Message == nil:
		return nil, errors.New("no string message")
	}
	return &jsonrpc.Error{Code: *w.Code, Message: *w.Message, Data: json.RawMessage(w.Data)}, nil
}

// stringValue reads a JSON string value; false for any other kind, null
// included. v was read by the decoder, so its only possible flaw is
// invalid UTF-8, which AppendUnquote replaces (and reports) as the SDK's
// decoder replaces it.
func stringValue(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	s, _ := jsontext.AppendUnquote(nil, v)
	return string(s), true
}

// nestsTooDeep reports whether data opens more than maxNesting objects or arrays
// inside one another, outside strings. Unbalanced text is left to the
// decoder to refuse.
func nestsTooDeep(data []byte) bool {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; depth > maxNesting {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}
