// Package conntest lets a test wait for the system to see a server's connections end, so that
// what a client does next does not depend on when its runtime reads a closed socket.
//
// A server process killed closes its sockets as it exits, but a client learns of it only when
// its kernel has the peer's FIN and, for a connection kept alive in net/http's Transport, only
// once the Transport's reader has read it and dropped the connection. A call made in between
// may take the dead connection and write to it, and then cannot know whether the server read
// its request. The waits here are on the kernel's socket table (Linux /proc/net/tcp), not on
// time.
package conntest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TCP states as /proc/net/tcp writes them.
const (
	established = "01"
	closeWait   = "08"
)

// WaitPeerClosed waits until no connection to addr (an IPv4 host:port) is established: the
// peer's end of each has closed, and the kernel holds its FIN (or its reset).
func WaitPeerClosed(t testing.TB, addr string) {
	t.Helper()
	wait(t, addr, established)
}

// WaitDropped waits until every connection to addr has also been closed by this machine's
// side: none is established, and none is left half closed (CLOSE_WAIT), as a kept-alive
// connection stays until its reader sees the end and drops it.
func WaitDropped(t testing.TB, addr string) {
	t.Helper()
	wait(t, addr, established, closeWait)
}

func wait(t testing.TB, addr string, states ...string) {
	t.Helper()
	remote, err := procAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := count(remote, states)
		if err != nil {
			t.Skipf("the socket table cannot be read: %v", err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections to %s still in state %v after 30s", n, addr, states)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procAddr writes addr as /proc/net/tcp does: the IPv4 address as a little-endian word in hex,
// the port in hex.
func procAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	ip := net.ParseIP(host).To4()
	p, err := strconv.Atoi(port)
	if ip == nil || err != nil {
		return "", fmt.Errorf("conntest: %q is not an IPv4 address and port", addr)
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], p), nil
}

// count returns how many sockets connected to remote are in one of states.
func count(remote string, states []string) (int, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st ...
		fields := strings.Fields(sc.Text())
		if len(fields) >= 4 && fields[2] == remote && slices.Contains(states, fields[3]) {
			n++
		}
	}
	return n, sc.Err()
}
