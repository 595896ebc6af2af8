package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's stdio connection decodes every inbound line up to three times
// (an attempt as a batch, then as a message, then the result) and each
// decode builds a decoder with a fresh 32 KiB buffer. A tool call paid
// about 100 KiB of garbage for a few hundred bytes of answer. This
// connection frames lines with one bufio.Reader per connection and
// decodes the JSON-RPC envelope by scanning it in place, copying out only
// the params, result or error data. What remains per call is the SDK's
// own decode of the result into its CallToolResult.

const (
	// maxLineLength bounds one inbound message, as the SDK's stdio
	// connection does; a longer line fails the connection.
	maxLineLength = mcp.DefaultMaxLineLength
	// readBufferSize holds a typical message whole, so that it is decoded
	// straight from the reader's buffer.
	readBufferSize = 64 << 10
	// keepLongLine is the largest spill buffer kept for the next long
	// line; a bigger one (a huge listing) is left to the collector.
	keepLongLine = 1 << 20
	// keepWriteBuffer is the largest encoding buffer kept between writes.
	keepWriteBuffer = 64 << 10
	// terminateWait is how long Close waits after closing the child's
	// stdin before sending SIGTERM, and after SIGTERM before SIGKILL, as
	// mcp.CommandTransport does.
	terminateWait = 5 * time.Second
	// stderrWaitDelay is how long the end of a child waits for its
	// standard error to be closed once it has exited.
	stderrWaitDelay = time.Second
)

var (
	errLineTooLong = fmt.Errorf("message longer than the %d-byte limit", maxLineLength)
	// errInvalidMessage marks a line that is not one well-formed JSON-RPC
	// 2.0 message. It deliberately is not a *jsonrpc.Error: a broken
	// connection must never look like the server's refusal of a call.
	errInvalidMessage = errors.New("invalid JSON-RPC message")
)

// commandTransport is an mcp.Transport that runs a command and speaks
// newline-delimited JSON-RPC over its stdin and stdout, in place of
// mcp.CommandTransport. The command's environment and directory are
// whatever the caller configured on cmd; its stderr goes to stderr when
// that is set, and is otherwise whatever the caller configured.
type commandTransport struct {
	cmd *exec.Cmd
	// stderr, if set, receives the command's standard error and is
	// flushed once the command has exited.
	stderr *stderrLog
	// terminate overrides terminateWait (tests).
	terminate time.Duration
	// conn is the connection Connect made.
	conn *stdioConn
}

// Connect starts the command.
func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if t.stderr != nil {
		t.cmd.Stderr = t.stderr
		// The exec package copies stderr through a pipe, and Wait waits for
		// the copy: a grandchild that keeps the pipe open (a shell's
		// background job, a launcher's child) must not hold up the end of
		// the server past this.
		t.cmd.WaitDelay = stderrWaitDelay
	}
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", t.cmd.Path, err)
	}
	wait := t.terminate
	if wait <= 0 {
		wait = terminateWait
	}
	cmd, stderr := t.cmd, t.stderr
	t.conn = newStdioConn(stdout, stdin, maxLineLength, func() error {
		err := stopProcess(cmd, wait)
		if stderr != nil {
			stderr.flush()
		}
		return err
	})
	return t.conn, nil
}

// stopProcess waits for a child whose stdin has been closed to exit,
// then sends SIGTERM, then SIGKILL, each after wait. The MCP stdio
// transport specifies this order of shutdown.
//
// A child that ends by SIGTERM or SIGINT before this function signals it
// was stopped with the gateway: its whole process group received the
// signal (a service manager's stop, a terminal's Ctrl-C). That is a
// normal end, not an error. Any other exit status is one, and so is an
// end this function had to force: the child ignored the end of its input.
func stopProcess(cmd *exec.Cmd, wait time.Duration) error {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	await := func() (error, bool) {
		timer.Reset(wait)
		select {
		case err := <-exited:
			return err, true
		case <-timer.C:
			return nil, false
		}
	}
	if err, ok := await(); ok {
		return stoppedWithTheGateway(err)
	}
	// If SIGTERM cannot be sent, go straight to SIGKILL.
	if cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := await(); ok {
			return err
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing %s: %w", cmd.Path, err)
	}
	if err, ok := await(); ok {
		return err
	}
	return fmt.Errorf("%s did not exit after SIGKILL", cmd.Path)
}

// stoppedWithTheGateway maps an exit by SIGTERM or SIGINT to nil; see
// stopProcess.
func stoppedWithTheGateway(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() &&
		(ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGINT) {
		return nil
	}
	return err
}

// stdioConn is an mcp.Connection over newline-delimited JSON. One
// goroutine reads and decodes lines; Read hands its messages over.
type stdioConn struct {
	w    io.WriteCloser
	stop func() error // after w is closed: ends the peer (nil: nothing to end)

	incoming chan jsonrpc.Message
	readDone chan struct{} // closed when the read loop has ended
	readErr  error         // why it ended; set before readDone is closed

	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error

	writeMu sync.Mutex
	wbuf    bytes.Buffer
}

func newStdioConn(r io.Reader, w io.WriteCloser, maxLine int, stop func() error) *stdioConn {
	c := &stdioConn{
		w:        w,
		stop:     stop,
		incoming: make(chan jsonrpc.Message),
		readDone: make(chan struct{}),
		closed:   make(chan struct{}),
	}
	go c.readLoop(r, maxLine)
	return c
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message. It returns io.EOF once the connection
// is closed or the peer has closed its output, and the framing or
// decoding error that ended the connection otherwise.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.readDone:
		select {
		case <-c.closed:
			// The read loop failed because Close took its input away.
			return nil, io.EOF
		default:
		}
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *stdioConn) readLoop(r io.Reader, maxLine int) {
	c.readErr = c.readLines(r, maxLine)
	close(c.readDone)
}

// readLines decodes and delivers one message per line until the input
// ends or a line is refused. A line's bytes are only borrowed: the
// decoder copies what a message keeps.
func (c *stdioConn) readLines(r io.Reader, maxLine int) error {
	br := bufio.NewReaderSize(r, min(readBufferSize, maxLine+1))
	var long []byte // spill buffer for lines longer than br's buffer
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(long) > maxLine+len("\r\n") {
					return errLineTooLong
				}
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
			if cap(long) > keepLongLine {
				long = nil
			}
		}
		eof := false
		switch {
		case err == io.EOF:
			// A last message may lack its newline; an empty remainder is
			// a clean end.
			eof = true
		case err != nil:
			return fmt.Errorf("reading from server: %w", err)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > maxLine {
			return errLineTooLong
		}
		if len(bytes.TrimLeft(line, " \t\r\n")) > 0 {
			msg, err := decodeMessage(line)
			if err != nil {
				return err
			}
			select {
			case c.incoming <- msg:
			case <-c.closed:
				return io.EOF
			}
		}
		if eof {
			return io.EOF
		}
	}
}

// Write sends msg as one line. Concurrent writes never interleave.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.wbuf.Reset()
	if err := encodeMessage(&c.wbuf, msg); err != nil {
		return err
	}
	c.wbuf.WriteByte('\n')
	_, err := c.w.Write(c.wbuf.Bytes())
	if c.wbuf.Cap() > keepWriteBuffer {
		c.wbuf = bytes.Buffer{}
	}
	if err != nil {
		return fmt.Errorf("writing to server: %w", err)
	}
	return nil
}

// Close closes the peer's input, which asks a stdio server to exit, and
// ends the process if it does not. A pending Read returns io.EOF at
// once. Close may be called more than once and concurrently.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		err := c.w.Close()
		if err != nil {
			err = fmt.Errorf("closing server input: %w", err)
		}
		if c.stop != nil {
			err = errors.Join(err, c.stop())
		}
		c.closeErr = err
	})
	return c.closeErr
}

// encodeMessage appends msg's wire form to buf, byte for byte what
// jsonrpc.EncodeMessage produces. The common case, a request whose id and
// method need no escaping, is written directly; anything else goes
// through jsonrpc.EncodeMessage.
func encodeMessage(buf *bytes.Buffer, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && plainRequest(req) {
		start := buf.Len()
		buf.WriteString(`{"jsonrpc":"2.0"`)
		switch id := req.ID.Raw().(type) {
		case int64:
			buf.WriteString(`,"id":`)
			buf.Write(appendInt(buf.AvailableBuffer(), id))
		case string:
			buf.WriteString(`,"id":"`)
			buf.WriteString(id)
			buf.WriteByte('"')
		}
		if req.Method != "" {
			buf.WriteString(`,"method":"`)
			buf.WriteString(req.Method)
			buf.WriteByte('"')
		}
		if len(req.Params) > 0 {
			buf.WriteString(`,"params":`)
			// encoding/json compacts a RawMessage (without HTML escaping,
			// as the SDK configures it) and refuses an invalid one.
			if err := json.Compact(buf, req.Params); err != nil {
				buf.Truncate(start)
				return fmt.Errorf("marshaling jsonrpc message: %w", err)
			}
		}
		buf.WriteByte('}')
		return nil
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	buf.Write(data)
	return nil
}

func appendInt(b []byte, n int64) []byte {
	var tmp [20]byte
	i := len(tmp)
	u := uint64(n)
	if n < 0 {
		u = -u
	}
	for {
		i--
		tmp[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if n < 0 {
		b = append(b, '-')
	}
	return append(b, tmp[i:]...)
}

// plainRequest reports whether req's id and method encode as their bytes
// between quotes.
func plainRequest(req *jsonrpc.Request) bool {
	switch id := req.ID.Raw().(type) {
	case nil, int64:
	case string:
		if !plainString(id) {
			return false
		}
	default:
		return false
	}
	return plainString(req.Method)
}

func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// maxNesting is the deepest nesting of objects and arrays a message may
// have, counting the message itself, as in the SDK's decoder.
const maxNesting = 1000

// maxExactID bounds numeric ids to those a float64 (through which
// jsonrpc.MakeID takes them) holds exactly.
const maxExactID = 1 << 53

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
	if len(data) == 0 || data[0] != '{' || !json.Valid(data) {
		return nil, fmt.Errorf("%w: not a JSON object", errInvalidMessage)
	}
	var version, id, method, params, result, werr []byte
	err := members(data, func(name, value []byte) error {
		var field *[]byte
		switch string(name) {
		case "jsonrpc":
			field = &version
		case "id":
			field = &id
		case "method":
			field = &method
		case "params":
			field = &params
		case "result":
			field = &result
		case "error":
			field = &werr
		default:
			return fmt.Errorf("unknown member %q", name)
		}
		if *field != nil {
			return fmt.Errorf("duplicate member %q", name)
		}
		*field = value
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidMessage, err)
	}
	if v, err := stringValue(version); err != nil || v != "2.0" {
		return nil, fmt.Errorf("%w: jsonrpc must be \"2.0\"", errInvalidMessage)
	}
	if bytes.Equal(werr, []byte("null")) {
		// The SDK reads a null error as none.
		werr = nil
	}
	var jid jsonrpc.ID
	if id != nil {
		if jid, err = decodeID(id); err != nil {
			return nil, fmt.Errorf("%w: %w", errInvalidMessage, err)
		}
	}
	if method != nil {
		if result != nil || werr != nil {
			return nil, fmt.Errorf("%w: a request with a result or error", errInvalidMessage)
		}
		m, err := stringValue(method)
		if err != nil {
			return nil, fmt.Errorf("%w: method must be a string", errInvalidMessage)
		}
		return &jsonrpc.Request{ID: jid, Method: m, Params: clone(params)}, nil
	}
	switch {
	case id == nil:
		return nil, fmt.Errorf("%w: neither a request nor a response with an id", errInvalidMessage)
	case params != nil:
		return nil, fmt.Errorf("%w: a response with params", errInvalidMessage)
	case (result == nil) == (werr == nil):
		return nil, fmt.Errorf("%w: a response needs exactly one of result and error", errInvalidMessage)
	}
	resp := &jsonrpc.Response{ID: jid, Result: clone(result)}
	if werr != nil {
		e, err := decodeError(werr)
		if err != nil {
			return nil, fmt.Errorf("%w: error: %w", errInvalidMessage, err)
		}
		resp.Error = e
	}
	return resp, nil
}

func clone(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

// decodeID reads a string or an integer id. null, fractions, exponents
// and integers beyond 2^53 are refused rather than coerced.
func decodeID(v []byte) (jsonrpc.ID, error) {
	if v[0] == '"' {
		s, err := stringValue(v)
		if err != nil {
			return jsonrpc.ID{}, err
		}
		return jsonrpc.MakeID(s)
	}
	n, ok := intValue(v)
	if !ok || n > maxExactID || n < -maxExactID {
		return jsonrpc.ID{}, fmt.Errorf("id %.40s is not a string or an integer", v)
	}
	return jsonrpc.MakeID(float64(n))
}

// decodeError reads a JSON-RPC error object.
func decodeError(v []byte) (*jsonrpc.Error, error) {
	if v[0] != '{' {
		return nil, errors.New("not an object")
	}
	var code, message, data []byte
	err := members(v, func(name, value []byte) error {
		var field *[]byte
		switch string(name) {
		case "code":
			field = &code
		case "message":
			field = &message
		case "data":
			field = &data
		default:
			return fmt.Errorf("unknown member %q", name)
		}
		if *field != nil {
			return fmt.Errorf("duplicate member %q", name)
		}
		*field = value
		return nil
	})
	if err != nil {
		return nil, err
	}
	e := &jsonrpc.Error{Data: clone(data)}
	var ok bool
	if code == nil {
		return nil, errors.New("no code")
	}
	if e.Code, ok = intValue(code); !ok {
		return nil, errors.New("code must be an integer")
	}
	if message == nil {
		return nil, errors.New("no message")
	}
	if e.Message, err = stringValue(message); err != nil {
		return nil, errors.New("message must be a string")
	}
	return e, nil
}

// members calls f with the name and value bytes of each member of the
// object obj, which must be valid JSON nested no deeper than maxNesting.
// Names are compared exactly, after unescaping.
func members(obj []byte, f func(name, value []byte) error) error {
	i := skipSpace(obj, 1)
	if obj[i] == '}' {
		return nil
	}
	for {
		end := skipString(obj, i)
		name := obj[i:end]
		if bytes.IndexByte(name, '\\') >= 0 {
			s, err := stringValue(name)
			if err != nil {
				return err
			}
			name = []byte(s)
		} else {
			name = name[1 : len(name)-1]
		}
		i = skipSpace(obj, skipSpace(obj, end)+1) // past ':'
		end, ok := skipValue(obj, i, maxNesting-1)
		if !ok {
			return fmt.Errorf("nested deeper than %d levels", maxNesting)
		}
		if err := f(name, obj[i:end]); err != nil {
			return err
		}
		i = skipSpace(obj, end)
		if obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // past ','
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexAny(b[j:], `"\`)
		if k < 0 {
			break
		}
		j += k
		if b[j] == '\\' {
			j += 2
			continue
		}
		return j + 1
	}
	return len(b)
}

// skipValue returns the index just past the valid JSON value at b[i],
// and false if the value nests deeper than maxDepth.
func skipValue(b []byte, i, maxDepth int) (int, bool) {
	switch b[i] {
	case '"':
		return skipString(b, i), true
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				if depth++; depth > maxDepth {
					return i, false
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, true
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i, true
			}
			i++
		}
		return i, true
	}
}

// stringValue decodes a JSON string value. Escapes and invalid UTF-8 are
// handled by encoding/json, which replaces bad bytes as the SDK does.
func stringValue(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' {
		return "", errors.New("not a string")
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	return s, nil
}

// intValue reads a JSON number that is an integer literal: no fraction,
// no exponent.
func intValue(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}
