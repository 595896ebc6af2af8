package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's stdio connection decodes every inbound line up to three times
// (an attempt as a batch, then as a message, then the result) and each
// decode builds a decoder with a fresh 32 KiB buffer. A tool call paid
// about 100 KiB of garbage for a few hundred bytes of answer. This
// connection frames lines with one bufio.Reader per connection and
// decodes each line once, strictly (message.go). What remains per call is
// the SDK's own decode of the result into its CallToolResult.

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
	ee, ok := errors.AsType[*exec.ExitError](err)
	if !ok {
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
		// At io.EOF a last message may lack its newline; an empty
		// remainder is a clean end.
		if err != nil && err != io.EOF {
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
		if err == io.EOF {
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
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.wbuf.Write(data)
	c.wbuf.WriteByte('\n')
	_, err = c.w.Write(c.wbuf.Bytes())
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
