package loadgen

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// TestSampleChildren runs a stand-in daemon, a shell whose child spins, and checks that the
// child's CPU is found and counted apart from the daemon's.
func TestSampleChildren(t *testing.T) {
	sh := testtool.Path(t, "sh", "the stand-in daemon is a shell")
	cmd := exec.Command(sh, "-c", "sh -c 'while :; do :; done' & sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cmd: cmd}
	t.Cleanup(func() {
		for _, pid := range descendants(cmd.Process.Pid) {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(descendants(cmd.Process.Pid)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s := d.Sample()
	if len(s.children) != 2 {
		t.Fatalf("children %v, want the spinning shell and sleep", s.children)
	}
	for d.Since(s).Tool < 50*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	u := d.Since(s)
	if u.ToolProcs != 2 || u.Tool < 50*time.Millisecond {
		t.Errorf("tool CPU %s over %d processes, want ≥ 50ms over 2", u.Tool, u.ToolProcs)
	}
	if u.Daemon > u.Tool {
		t.Errorf("daemon CPU %s above its spinning child's %s", u.Daemon, u.Tool)
	}
}

func TestPrintCPU(t *testing.T) {
	r := Result{N: 1000, Elapsed: time.Second}
	head := `^cpu: daemon 400µs/request \(0\.40 cores, peak RSS 3 MiB\), load generator 20µs/request \(0\.02 cores\), \d+ cores`
	for _, tc := range []struct {
		name string
		u    CPUUse
		want string
	}{
		{"no tool server", CPUUse{Daemon: 400 * time.Millisecond, Load: 20 * time.Millisecond, PeakRSS: 3 << 20}, head + `\n$`},
		{"tool server", CPUUse{Daemon: 400 * time.Millisecond, Load: 20 * time.Millisecond, PeakRSS: 3 << 20, Tool: 50 * time.Millisecond, ToolProcs: 1},
			head + `, tool server 50µs/request \(0\.05 cores\)\n$`},
		{"idle tool server", CPUUse{Daemon: 400 * time.Millisecond, Load: 20 * time.Millisecond, PeakRSS: 3 << 20, ToolProcs: 1},
			head + `, tool server 0s/request \(0\.00 cores\)\n$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			r.PrintCPU(&b, tc.u)
			if !regexp.MustCompile(tc.want).Match(b.Bytes()) {
				t.Errorf("got %q, want %s", b.String(), tc.want)
			}
		})
	}
}

// TestThreadCPU spins on a locked thread until its CPU time moves: the reading must grow with
// the goroutine's own work.
func TestThreadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a thread's own CPU time is read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := ThreadCPU()
	deadline := time.Now().Add(10 * time.Second)
	x := uint64(1)
	for ThreadCPU()-start < 5*time.Millisecond && time.Now().Before(deadline) {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if got := ThreadCPU() - start; got < 5*time.Millisecond {
		t.Errorf("thread CPU moved %s while spinning (x %d), want ≥ 5ms", got, x)
	}
}
