package conntest

import (
	"net"
	"testing"
)

func TestProcAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:8080", "0100007F:1F90"},
		{"10.1.2.3:1", "0302010A:0001"},
	} {
		if got, err := procAddr(tc.in); err != nil || got != tc.want {
			t.Errorf("procAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"[::1]:80", "localhost", "127.0.0.1:x"} {
		if _, err := procAddr(bad); err == nil {
			t.Errorf("procAddr(%q) accepted", bad)
		}
	}
}

// A connection the server closes is seen closed by its peer, then dropped once the client
// closes its end.
func TestWaits(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	addr := l.Addr().String()
	if n, err := count(mustProc(t, addr), []string{established}); err != nil {
		t.Skip(err)
	} else if n != 1 {
		t.Fatalf("%d established connections to %s, want 1", n, addr)
	}
	s.Close()
	l.Close()
	WaitPeerClosed(t, addr)
	if n, _ := count(mustProc(t, addr), []string{closeWait}); n != 1 {
		t.Fatalf("%d half-closed connections, want the client's", n)
	}
	c.Close()
	WaitDropped(t, addr)
}

func mustProc(t *testing.T, addr string) string {
	p, err := procAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
