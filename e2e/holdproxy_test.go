package e2e

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
)

// HTTP/2 frame types the hold proxy looks at (RFC 9113, section 6).
const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
)

// h2Preface is what an HTTP/2 client sends before its first frame.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// frame is one HTTP/2 frame as it was read, with what the proxy needs to know of it.
type frame struct {
	raw    []byte // the 9-byte header and the payload
	typ    byte
	stream uint32
	held   bool // read while the proxy held
}

func readFrame(r io.Reader) (frame, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	raw := make([]byte, 9+n)
	copy(raw, h[:])
	if _, err := io.ReadFull(r, raw[9:]); err != nil {
		return frame{}, err
	}
	return frame{raw: raw, typ: h[3], stream: binary.BigEndian.Uint32(h[5:9]) & 0x7fffffff}, nil
}

// holdProxy stands between a gRPC client (an executor) and etcd. While it holds, nothing the
// client sends reaches etcd, and the client's RST_STREAM frames are dropped: a request whose
// caller gave up at its deadline is still delivered, late, with nothing to cancel it — etcd
// applies a transaction whose answer timed out, as a cluster stalled by its disk or cut off
// for a while can. On release, the first request sent during the hold goes first, and the
// rest only once etcd has answered it, so that request is the first thing etcd applies.
// Frames are otherwise forwarded whole and in order, which HPACK requires.
type holdProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu      sync.Mutex
	holding bool
	gate    chan struct{} // closed when the proxy does not hold
}

func newHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{t: t, ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

// Endpoint is the proxy's client URL.
func (p *holdProxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

// Hold stops forwarding what clients send.
func (p *holdProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding, p.gate = true, make(chan struct{})
}

// Release forwards what was held (see holdProxy) and then everything as it comes.
func (p *holdProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = false
	close(p.gate)
}

func (p *holdProxy) state() (bool, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holding, p.gate
}

func (p *holdProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go p.conn(c, s)
	}
}

// conn relays one connection: frames from the client through a queue that a hold stops,
// frames from the server straight back, noting when the server answers the first held
// stream.
func (p *holdProxy) conn(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		queue    []frame
		done     bool
		first    uint32        // the first stream opened while holding
		answered chan struct{} // closed when the server sends a frame of first
		once     sync.Once
	)
	answered = make(chan struct{})
	// Server to client, as it comes.
	go func() {
		defer c.Close()
		for {
			f, err := readFrame(s)
			if err != nil {
				return
			}
			mu.Lock()
			if first != 0 && f.stream == first && (f.typ == frameHeaders || f.typ == frameData) {
				once.Do(func() { close(answered) })
			}
			mu.Unlock()
			if _, err := c.Write(f.raw); err != nil {
				return
			}
		}
	}()
	// Client to queue.
	go func() {
		defer func() { mu.Lock(); done = true; cond.Broadcast(); mu.Unlock() }()
		pre := make([]byte, len(h2Preface))
		if _, err := io.ReadFull(c, pre); err != nil {
			return
		}
		mu.Lock()
		queue = append(queue, frame{raw: pre, typ: 0xff})
		cond.Broadcast()
		mu.Unlock()
		for {
			f, err := readFrame(c)
			if err != nil {
				return
			}
			holding, _ := p.state()
			if holding && f.typ == frameRSTStream {
				continue // the client gave up; etcd is not told
			}
			f.held = holding
			mu.Lock()
			if holding && f.typ == frameHeaders && first == 0 {
				first = f.stream
			}
			queue = append(queue, f)
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	// Queue to server, stopped while the proxy holds.
	for {
		mu.Lock()
		for len(queue) == 0 && !done {
			cond.Wait()
		}
		if len(queue) == 0 {
			mu.Unlock()
			return
		}
		f := queue[0]
		queue = queue[1:]
		firstStream := first
		mu.Unlock()
		_, gate := p.state()
		if f.held {
			<-gate
		}
		// Another request opened during the hold waits until etcd has answered the first.
		if f.held && f.typ == frameHeaders && f.stream != firstStream && firstStream != 0 {
			<-answered
		}
		if _, err := s.Write(f.raw); err != nil {
			return
		}
	}
}
