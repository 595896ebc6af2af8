package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// The minimal server speaks only what an MCP client needs to call echo over stdio: one JSON-RPC
// 2.0 message per line, initialize, notifications (ignored), ping, tools/list and tools/call. It
// exists so that a load run of the executor spends the machine's CPU on the executor, not on the
// tool: the go-sdk server allocates a 32 KiB decode buffer per JSON value it reads.

// initializeVersions are the protocol versions the go-sdk v1.8.0 client accepts in an
// initialize answer. 2026-07-28 is not among them here: from that version on the handshake is
// server/discover, and like the go-sdk server, initialize answers at most 2025-11-25.
var initializeVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// toolsListResult is the tools/list result: the same tool the go-sdk server mode declares.
const toolsListResult = `{"tools":[{"name":"echo","description":"Return the arguments unchanged.","inputSchema":` + schema + `}]}`

// message is one inbound JSON-RPC message. It is reused from line to line: encoding/json
// copies a json.RawMessage into the capacity it already has.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type initializeParams struct {
	ProtocolVersion string `json:"protocolVersion"`
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// minimal is the state of one minimal server: its reader, its writer, and the buffers it reuses.
type minimal struct {
	r    *bufio.Reader
	w    *bufio.Writer
	line []byte // a line longer than r's buffer, assembled
	out  []byte // the answer being rendered
	msg  message
	call callParams
	init initializeParams
}

// serveMinimal answers the messages read from r on w until r ends.
func serveMinimal(r io.Reader, w io.Writer) error {
	m := &minimal{r: bufio.NewReaderSize(r, 64<<10), w: bufio.NewWriterSize(w, 64<<10)}
	for {
		line, err := m.readLine()
		if len(bytes.TrimSpace(line)) > 0 {
			if werr := m.handle(line); werr != nil {
				return fmt.Errorf("write answer: %w", werr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read message: %w", err)
		}
	}
}

// readLine returns the next line, with its newline if it has one. It is valid until the next call.
func (m *minimal) readLine() ([]byte, error) {
	frag, err := m.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return frag, err // the common case: the line fits the reader's buffer, no copy
	}
	m.line = append(m.line[:0], frag...)
	for err == bufio.ErrBufferFull {
		frag, err = m.r.ReadSlice('\n')
		m.line = append(m.line, frag...)
	}
	return m.line, err
}

// handle answers one message, if it needs an answer.
func (m *minimal) handle(line []byte) error {
	m.msg.JSONRPC, m.msg.ID, m.msg.Method, m.msg.Params = "", m.msg.ID[:0], "", m.msg.Params[:0]
	if err := json.Unmarshal(line, &m.msg); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			return m.writeError(nil, codeParseError, "parse error")
		}
		return m.writeError(nil, codeInvalidRequest, "invalid request")
	}
	id := m.msg.ID
	if m.msg.JSONRPC != "2.0" || !validID(id) {
		return m.writeError(nil, codeInvalidRequest, "invalid request")
	}
	if len(id) == 0 {
		return nil // a notification (or a response to a request this server never sends)
	}
	if m.msg.Method == "" {
		return nil // a response: this server sends no requests, so there is nothing to match it to
	}
	switch m.msg.Method {
	case "initialize":
		m.init.ProtocolVersion = ""
		if err := unmarshalParams(m.msg.Params, &m.init); err != nil {
			return m.writeError(id, codeInvalidParams, "invalid params: "+err.Error())
		}
		version := initializeVersions[0]
		if slices.Contains(initializeVersions, m.init.ProtocolVersion) {
			version = m.init.ProtocolVersion
		}
		return m.writeResult(id, `{"capabilities":{"tools":{}},"protocolVersion":"`, version, `","serverInfo":{"name":"echo","version":"1.0.0"}}`)
	case "ping":
		return m.writeResult(id, `{}`)
	case "tools/list":
		return m.writeResult(id, toolsListResult)
	case "tools/call":
		m.call.Name, m.call.Arguments = "", m.call.Arguments[:0]
		if err := unmarshalParams(m.msg.Params, &m.call); err != nil {
			return m.writeError(id, codeInvalidParams, "invalid params: "+err.Error())
		}
		if m.call.Name != "echo" {
			return m.writeError(id, codeInvalidParams, "unknown tool "+strconv.Quote(m.call.Name))
		}
		m.out = m.begin(id)
		m.out = append(m.out, `,"result":{"content":[{"type":"text","text":`...)
		m.out = appendString(m.out, m.call.Arguments)
		m.out = append(m.out, "}]}}\n"...)
		return m.flush()
	default:
		return m.writeError(id, codeMethodNotFound, "method not found: "+strconv.Quote(m.msg.Method))
	}
}

// validID reports whether id is absent, or a JSON-RPC id: a string, a number or null.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return true
	}
	switch c := id[0]; {
	case c == '"', c == '-', '0' <= c && c <= '9', c == 'n':
		return true
	}
	return false
}

// unmarshalParams decodes params into v; absent params leave v as it is.
func unmarshalParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	return json.Unmarshal(params, v)
}

// begin starts an answer to id in m.out.
func (m *minimal) begin(id json.RawMessage) []byte {
	out := append(m.out[:0], `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		return append(out, "null"...)
	}
	return append(out, id...)
}

// writeResult writes a result made of the concatenated JSON parts.
func (m *minimal) writeResult(id json.RawMessage, parts ...string) error {
	m.out = m.begin(id)
	m.out = append(m.out, `,"result":`...)
	for _, p := range parts {
		m.out = append(m.out, p...)
	}
	m.out = append(m.out, "}\n"...)
	return m.flush()
}

// writeError writes a JSON-RPC error; a nil id is written as null.
func (m *minimal) writeError(id json.RawMessage, code int, text string) error {
	m.out = m.begin(id)
	m.out = append(m.out, `,"error":{"code":`...)
	m.out = strconv.AppendInt(m.out, int64(code), 10)
	m.out = append(m.out, `,"message":`...)
	m.out = appendString(m.out, []byte(text))
	m.out = append(m.out, "}}\n"...)
	return m.flush()
}

// flush writes the rendered answer with one Write and sends it.
func (m *minimal) flush() error {
	if _, err := m.w.Write(m.out); err != nil {
		return err
	}
	return m.w.Flush()
}

// appendString appends s as a JSON string, invalid UTF-8 as U+FFFD: the echo answers whatever
// the executor sent, and jsontext reports invalid UTF-8 only after writing the replacement.
func appendString(dst, s []byte) []byte {
	dst, _ = jsontext.AppendQuote(dst, s)
	return dst
}
