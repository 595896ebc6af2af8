package etcdx

import (
	"context"
	"strings"
	"testing"
)

func TestCheckEndpoints(t *testing.T) {
	tests := []struct {
		eps  []string
		tls  *TLS
		want string
	}{
		{[]string{"http://127.0.0.1:2379"}, nil, ""},
		{[]string{"https://a:2379", "https://b:2379"}, &TLS{CA: "ca.pem"}, ""},
		{nil, nil, "at least one"},
		{[]string{"127.0.0.1:2379"}, nil, "http:// or https://"},
		{[]string{"http://u:p@a:2379"}, nil, "nothing else"},
		{[]string{"http://a:2379/x"}, nil, "nothing else"},
		{[]string{"http://a:1", "https://b:1"}, nil, "mix"},
		{[]string{"http://a:1"}, &TLS{}, "tls is set"},
	}
	for _, tt := range tests {
		err := CheckEndpoints(tt.eps, tt.tls)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v %v: %v, want %q", tt.eps, tt.tls, err, tt.want)
		}
	}
}

func TestClientRefusesHalfCredentials(t *testing.T) {
	for _, c := range []Conn{
		{Endpoints: []string{"http://127.0.0.1:1"}, Username: "u"},
		{Endpoints: []string{"https://127.0.0.1:1"}, TLS: &TLS{Cert: "c.pem"}},
	} {
		if cli, err := Client(context.Background(), c); err == nil {
			cli.Close()
			t.Errorf("%+v accepted", c)
		}
	}
}
