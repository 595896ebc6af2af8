package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-listen", "0.0.0.0:0"}, "loopback"},
		{[]string{"-listen", "nohost"}, "-listen"},
		{[]string{"-client", "agent"}, "ID:SECRET"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-exchange-client", "executor:executor-secret"}, "AUDIENCE"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
			t.Errorf("run(%q) = %v (stderr %q), want an error about %q", tc.args, err, stderr.String(), tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) printed %q on stdout", tc.args, stdout.String())
		}
	}
}
