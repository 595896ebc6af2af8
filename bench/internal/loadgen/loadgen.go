// Package loadgen owns what the load tools share: building the project's binaries, starting a
// daemon and waiting for it, and a closed-loop HTTP load with latency percentiles.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BuildIn compiles the named packages (name → package path) of the module checked out in
// srcDir into dir: another revision's binaries, built from its own worktree. An empty srcDir
// is the current directory, which must then be the module root.
func BuildIn(srcDir, dir string, pkgs map[string]string) error {
	// The build runs in srcDir, so the output path must not be relative to this one.
	out, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	where := "run from the module root"
	if srcDir != "" {
		where = "in " + srcDir
	}
	for name, pkg := range pkgs {
		b := exec.Command("go", "build", "-o", filepath.Join(out, name), pkg)
		b.Dir = srcDir
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build %s (%s): %w", pkg, where, err)
		}
	}
	return nil
}

// FreeAddr returns a loopback address that is free now, for a daemon's config to name. Its
// port is below the kernel's ephemeral range (32768 and up on Linux): a port from that range,
// once closed here, can be handed to any other process's bind(":0") or outgoing connection
// before the daemon binds it (a test's server elsewhere then answered the daemon's address),
// where a port below it goes only to a process that names it.
func FreeAddr() (string, error) {
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(minFixedPort+rand.IntN(32768-minFixedPort))))
		if err != nil {
			continue
		}
		defer l.Close()
		return l.Addr().String(), nil
	}
	return "", errors.New("no free loopback port between 20000 and 32767")
}

// minFixedPort is the lowest port FreeAddr picks: above the ports services are commonly
// configured on.
const minFixedPort = 20000

// Daemon is a daemon process started for a load run.
type Daemon struct {
	cmd  *exec.Cmd
	logf *os.File
}

// StartDaemon runs bin with args, its stderr in logPath, and waits until base/readyz answers
// 200. env is added to the daemon's environment (GOGC=… to measure a GC setting).
func StartDaemon(bin, logPath, base string, env []string, args ...string) (*Daemon, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	d := &Daemon{cmd: cmd, logf: logf}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.Stop()
	return nil, fmt.Errorf("%s not ready; see %s", bin, logPath)
}

// Stop interrupts the daemon and waits for it.
func (d *Daemon) Stop() {
	d.cmd.Process.Signal(os.Interrupt)
	d.cmd.Wait()
	d.logf.Close()
}

// PeakRSS returns the daemon's peak resident set size so far (Linux /proc VmHWM), or 0.
func (d *Daemon) PeakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// PidCPU returns the user + system CPU time process pid has used so far (Linux /proc), or 0
// when it cannot be read.
func PidCPU(pid int) time.Duration { return procCPU(fmt.Sprintf("/proc/%d/stat", pid)) }

// Pid returns the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// SelfCPU returns the CPU time this process (the load generator) has used so far.
func SelfCPU() time.Duration { return procCPU("/proc/self/stat") }

// procCPU reads utime + stime from a /proc stat file. Clock ticks are 1/100 s on Linux.
func procCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it start past its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// descendants returns the pids of pid's children, their children, and so on, from
// /proc/<pid>/task/<tid>/children (Linux). A process that exits meanwhile is skipped.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// CPUSample is the CPU time the daemon, each of its descendant processes (the MCP tool servers
// an executor starts) and the load generator had used at one moment.
type CPUSample struct {
	daemon, self time.Duration
	children     map[int]time.Duration // by pid
}

// Sample reads the CPU time used so far by the daemon, its descendants and this process.
func (d *Daemon) Sample() CPUSample {
	s := CPUSample{daemon: PidCPU(d.Pid()), self: SelfCPU(), children: map[int]time.Duration{}}
	for _, pid := range descendants(d.Pid()) {
		s.children[pid] = PidCPU(pid)
	}
	return s
}

// Since returns the CPU used from sample s until now, and the daemon's peak resident memory.
// A descendant started after s counts from zero; one that exited before now is not counted
// (its time is lost to the daemon's cutime, which is not read).
func (d *Daemon) Since(s CPUSample) CPUUse {
	now := d.Sample()
	u := CPUUse{Daemon: now.daemon - s.daemon, Load: now.self - s.self, PeakRSS: d.PeakRSS()}
	for pid, cpu := range now.children {
		u.Tool += cpu - s.children[pid]
		u.ToolProcs++
	}
	return u
}

// CPUUse is the CPU time the daemon, its tool servers and the load generator spent during a
// run, and the daemon's peak resident memory.
type CPUUse struct {
	Daemon, Load time.Duration
	PeakRSS      int64
	Tool         time.Duration // the daemon's descendant processes together
	ToolProcs    int           // how many descendants were running at the end
}

// PrintCPU writes the CPU each request cost the daemon and the load generator, how many of the
// machine's cores each kept busy on average, and the same for the daemon's tool servers when it
// has any.
func (r Result) PrintCPU(w io.Writer, u CPUUse) {
	if u.Daemon <= 0 || r.N == 0 {
		return
	}
	per := func(d time.Duration) time.Duration { return (d / time.Duration(r.N)).Round(time.Microsecond) }
	cores := func(d time.Duration) float64 { return d.Seconds() / r.Elapsed.Seconds() }
	fmt.Fprintf(w, "cpu: daemon %s/request (%.2f cores, peak RSS %d MiB), load generator %s/request (%.2f cores), %d cores",
		per(u.Daemon), cores(u.Daemon), u.PeakRSS>>20, per(u.Load), cores(u.Load), runtime.NumCPU())
	if u.ToolProcs > 0 {
		fmt.Fprintf(w, ", tool server %s/request (%.2f cores)", per(u.Tool), cores(u.Tool))
	}
	fmt.Fprintln(w)
}

// Result is what a load run measured.
type Result struct {
	N, Bad  int
	Elapsed time.Duration
	Lat     []time.Duration // sorted
}

// Pct returns the p-quantile latency.
func (r Result) Pct(p float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0 // a run that could not start
	}
	return r.Lat[int(float64(len(r.Lat)-1)*p)]
}

// Print writes a summary.
func (r Result) Print(w io.Writer, what string, clients int) {
	fmt.Fprintf(w, "%s: %d (non-200: %d) clients=%d\n", what, r.N, r.Bad, clients)
	fmt.Fprintf(w, "throughput: %.0f/s over %s\n", float64(r.N)/r.Elapsed.Seconds(), r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "latency: p50 %s  p90 %s  p99 %s  max %s\n", r.Pct(0.50).Round(time.Microsecond),
		r.Pct(0.90).Round(time.Microsecond), r.Pct(0.99).Round(time.Microsecond), r.Pct(1).Round(time.Microsecond))
}

// Run posts every body once to url from clients concurrent closed-loop clients, and checks each
// answer with ok (nil means status 200). The body ok is given is valid only during the call.
//
// Each client keeps one HTTP/1.1 connection open and writes each request with one write, so that
// the load generator costs the shared CPU as little as it can; see conn. A request that fails
// (connection error, malformed answer, or no answer within a minute) counts as bad.
func Run(url, token string, bodies []string, clients int, ok func(status int, body []byte) bool) (Result, error) {
	if ok == nil {
		ok = func(status int, _ []byte) bool { return status == 200 }
	}
	t, err := newTarget(url, token)
	if err != nil {
		return Result{}, err
	}
	lat := make([]time.Duration, len(bodies))
	var next, bad atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			c := newConn(t)
			defer c.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				t0 := time.Now()
				status, body, err := c.do(bodies[i])
				lat[i] = time.Since(t0)
				if err != nil {
					e := err // escapes only when a request fails
					firstErr.CompareAndSwap(nil, &e)
					bad.Add(1)
				} else if !ok(status, body) {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := Result{N: len(bodies), Bad: int(bad.Load()), Elapsed: time.Since(start), Lat: lat}
	slices.Sort(r.Lat)
	if r.Bad > 0 {
		if e := firstErr.Load(); e != nil {
			return r, fmt.Errorf("some requests failed, the first error: %w", *e)
		}
		return r, errors.New("some requests failed")
	}
	return r, nil
}

// Profile starts fetching a CPU profile of seconds from the daemon's debug listener at
// debugAddr (its debug_listen) into path, and returns a function that waits for it.
func Profile(debugAddr, path string, seconds int) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, seconds))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("profile: %s", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() error { return <-done }
}

// TraceSink starts an OTLP/HTTP traces endpoint on loopback that takes every export and keeps
// nothing, so that a daemon can be measured with tracing on, and returns the environment
// variable that points a daemon's exporter at it.
func TraceSink() (env string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		// An empty ExportTraceServiceResponse is zero bytes of protobuf.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go srv.Serve(l)
	return "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + l.Addr().String() + "/v1/traces", func() { srv.Close() }, nil
}
