package etcdx

import (
	"fmt"
	"testing"
)

func TestCheckCredentialFiles(t *testing.T) {
	tests := []struct {
		user, pwFile string
		tls          *TLS
		want         string
	}{
		{"", "", nil, "[]"},
		{"u", "/p", &TLS{CA: "ca", Cert: "c", Key: "k"}, "[]"},
		{"u", "", nil, "[s: username and password_file go together]"},
		{"", "/p", &TLS{Cert: "c"}, "[s: username and password_file go together s.tls: cert and key go together]"},
		{"", "", &TLS{Key: "k"}, "[s.tls: cert and key go together]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(CheckCredentialFiles("s", tt.user, tt.pwFile, tt.tls)); got != tt.want {
			t.Errorf("(%q, %q, %+v) = %s, want %s", tt.user, tt.pwFile, tt.tls, got, tt.want)
		}
	}
}
