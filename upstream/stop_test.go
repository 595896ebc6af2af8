package upstream

import (
	"os/exec"
	"testing"
)

// TestStopProcessSignalIsANormalEnd: a child that ends by SIGTERM or SIGINT
// it did not get from stopProcess (the one a service manager sends the
// whole process group when it stops the gateway) ended as asked, and the
// gateway's close reports no error for it; any other exit status is one.
// (A child stopProcess itself has to signal is reported: see
// TestCommandTransportStopsStubbornChild.)
func TestStopProcessSignalIsANormalEnd(t *testing.T) {
	for _, tc := range []struct {
		script  string
		wantErr bool
	}{
		{`read _; kill -TERM $$`, false},
		{`read _; kill -INT $$`, false},
		{`read _; exit 0`, false},
		{`read _; exit 3`, true},
		{`read _; kill -QUIT $$`, true},
	} {
		cmd := exec.Command("sh", "-c", tc.script)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdin.Close() // as the stdio connection's Close does first
		err = stopProcess(cmd, terminateWait)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: stopProcess = %v, want error: %v", tc.script, err, tc.wantErr)
		}
	}
}
