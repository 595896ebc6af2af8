// Package loadgen owns what the load tools share: building the project's binaries, starting a
// daemon and waiting for it, and a closed-loop HTTP load with latency percentiles.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Build compiles the named packages (name → package path) into dir. It must run from the
// module root.
func Build(dir string, pkgs map[string]string) error {
	for name, pkg := range pkgs {
		b := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build %s (run from the module root): %w", pkg, err)
		}
	}
	return nil
}

// FreeAddr returns a free loopback address.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start runs bin with args, its stderr in logPath, and waits until base/readyz answers 200.
// The returned stop function interrupts it and waits.
func Start(bin, logPath, base string, args ...string) (stop func(), err error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	stop = func() { cmd.Process.Signal(os.Interrupt); cmd.Wait(); logf.Close() }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return nil, fmt.Errorf("%s not ready; see %s", bin, logPath)
}

// Result is what a load run measured.
type Result struct {
	N, Bad  int
	Elapsed time.Duration
	Lat     []time.Duration // sorted
}

// Pct returns the p-quantile latency.
func (r Result) Pct(p float64) time.Duration { return r.Lat[int(float64(len(r.Lat)-1)*p)] }

// Print writes a summary.
func (r Result) Print(w io.Writer, what string, clients int) {
	fmt.Fprintf(w, "%s: %d (non-200: %d) clients=%d\n", what, r.N, r.Bad, clients)
	fmt.Fprintf(w, "throughput: %.0f/s over %s\n", float64(r.N)/r.Elapsed.Seconds(), r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "latency: p50 %s  p90 %s  p99 %s  max %s\n", r.Pct(0.50).Round(time.Microsecond),
		r.Pct(0.90).Round(time.Microsecond), r.Pct(0.99).Round(time.Microsecond), r.Lat[len(r.Lat)-1].Round(time.Microsecond))
}

// Run posts every body once to url from clients concurrent closed-loop clients, and checks each
// answer with ok (nil means status 200).
func Run(url, token string, bodies []string, clients int, ok func(status int, body []byte) bool) (Result, error) {
	if ok == nil {
		ok = func(status int, _ []byte) bool { return status == 200 }
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients}, Timeout: time.Minute}
	lat := make([]time.Duration, len(bodies))
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				t0 := time.Now()
				req, _ := http.NewRequest("POST", url, strings.NewReader(bodies[i]))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					lat[i] = time.Since(t0)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if !ok(resp.StatusCode, b) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r := Result{N: len(bodies), Bad: int(bad.Load()), Elapsed: time.Since(start), Lat: lat}
	slices.Sort(r.Lat)
	if r.Bad > 0 {
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
