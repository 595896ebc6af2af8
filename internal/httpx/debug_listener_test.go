package httpx

import (
	"context"
	"net"
	"testing"
)

// A listener on an address other than loopback is refused and closed, whatever bound it: the
// profiles show memory contents and have no authentication.
func TestServeDebugRefusesOtherAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ServeDebug(context.Background(), ln, nil); err == nil {
		t.Fatal("served the profiles on 0.0.0.0")
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("the refused listener is still open")
	}
}
