// Package etcdtest starts private etcd servers for tests: a real etcd process per test, on free
// loopback ports, with its data in the test's temporary directory — never the packaged service
// on the default ports. Without an etcd binary the test is skipped, or fails under VERDICT_CI=1
// (see testtool).
package etcdtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// BinaryEnv overrides the etcd binary; otherwise etcd is looked up in PATH, then /usr/bin/etcd.
const BinaryEnv = "VERDICT_ETCD_BIN"

// StartTimeout bounds the wait for a started member to report healthy.
const StartTimeout = 30 * time.Second

// Start runs a single-member etcd for t and returns its client endpoint. It is stopped when t
// ends.
func Start(t testing.TB) string {
	t.Helper()
	return NewServer(t).Endpoint
}

// Binary returns the etcd binary to run, or skips t (fails it under VERDICT_CI=1) when there is
// none.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv(BinaryEnv); b != "" {
		return b
	}
	if b, err := exec.LookPath("etcd"); err == nil {
		return b
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd"
	}
	testtool.Missing(t, "etcd is not installed (install Debian's etcd-server, or set "+BinaryEnv+")")
	return ""
}

// Server is one etcd member. Its ports and data directory survive Stop, so Restart brings the
// same member back with its data.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	// Name is the member's name.
	Name string

	t       testing.TB
	bin     string
	args    []string
	dataDir string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// NewServer starts a single-member cluster for t and waits until it is healthy. It is killed
// when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	return NewCluster(t, 1).Members[0]
}

// Cluster is a set of members started together.
type Cluster struct {
	Members []*Server
}

// NewCluster starts an n-member cluster for t and waits until every member is healthy. Members
// are killed when t ends.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := newCluster(t, n)
	c.start(t)
	return c
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Endpoint
	}
	return out
}

// start launches every member (they need each other to elect a leader) and waits until all are
// healthy.
func (c *Cluster) start(t testing.TB) {
	t.Helper()
	for _, m := range c.Members {
		m.launch()
	}
	for _, m := range c.Members {
		m.waitHealthy()
	}
}

func newCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	free := freePorts(t, 2*n) // member i's client port, then its peer port
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%s", i, free[2*i+1]))
	}
	c := &Cluster{}
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		client := "http://127.0.0.1:" + free[2*i]
		peer := "http://127.0.0.1:" + free[2*i+1]
		s := &Server{
			Endpoint: client,
			Name:     name,
			t:        t,
			bin:      bin,
			dataDir:  filepath.Join(dir, name),
			logPath:  filepath.Join(dir, name+".log"),
		}
		s.args = []string{
			"--name", name,
			"--data-dir", s.dataDir,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", "etcdtest-" + filepath.Base(dir),
			"--initial-cluster-state", "new",
			"--logger", "zap",
			"--log-outputs", "stderr",
		}
		t.Cleanup(s.Kill)
		c.Members = append(c.Members, s)
	}
	return c
}

// freePorts returns n loopback ports nobody listens on now, all different: each is held until
// the last is chosen, since a port just closed can be handed out again.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	return ports
}

// launch starts the process without waiting for it to be healthy.
func (s *Server) launch() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatalf("etcd %s is already running", s.Name)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// etcd 3.4 refuses to start on some architectures without this; it is harmless elsewhere.
	cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+runtime.GOARCH)
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("start etcd: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	s.cmd, s.done = cmd, done
}

// waitHealthy polls /health until the member reports a leader.
func (s *Server) waitHealthy() {
	s.t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(StartTimeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		done := s.done
		s.mu.Unlock()
		select {
		case <-done:
			s.t.Fatalf("etcd %s exited before it was healthy; log %s:\n%s", s.Name, s.logPath, s.tail())
		default:
		}
		if resp, err := client.Get(s.Endpoint + "/health"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"true"`) {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.t.Fatalf("etcd %s not healthy after %s; log %s:\n%s", s.Name, StartTimeout, s.logPath, s.tail())
}

// Stop shuts the member down gracefully and waits for it to exit.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill stops the member with SIGKILL and waits for it to exit. It does nothing if the member is
// not running.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Freeze stops the member's process with SIGSTOP: it keeps its connections and reads nothing
// until Thaw, as a member stalled by its disk or a long pause does. Kill and the end of the
// test end a frozen member too. It returns once every thread of the process has stopped: a
// signal is delivered when the kernel gets to it, and a request sent just after kill(2)
// returned could still be served.
func (s *Server) Freeze() {
	s.t.Helper()
	s.pause(syscall.SIGSTOP)
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); !stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("etcd %s: not stopped 30s after SIGSTOP", s.Name)
		}
	}
}

// stopped reports whether every thread of process pid is stopped (state T or t in
// /proc/pid/task/*/stat). Where /proc cannot be read, it reports true: the signal was sent.
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name, which is in parentheses and may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Thaw lets a frozen member run again with SIGCONT; what reached it meanwhile is served then.
func (s *Server) Thaw() { s.pause(syscall.SIGCONT) }

func (s *Server) pause(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatalf("etcd %s is not running", s.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("etcd %s: %v: %v", s.Name, sig, err)
	}
}

// Restart starts a stopped member again on the same ports with the same data, and waits until
// it is healthy (a member of a larger cluster needs a quorum running for that).
func (s *Server) Restart() {
	s.t.Helper()
	s.launch()
	s.waitHealthy()
}

// Running reports whether the member's process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *Server) tail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
