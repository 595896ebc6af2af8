package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serverEnv makes the test binary a plain net/http server instead of running tests, so that the
// benchmark can measure the client's CPU apart from the server's.
const serverEnv = "LOADGEN_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		serveBenchmark()
		return
	}
	os.Exit(m.Run())
}

// serveBenchmark answers every POST with a daemon-sized JSON answer, prints its address, and
// exits when its stdin closes (the benchmark ended or died).
func serveBenchmark() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	answer := []byte(`{"outcome":"verdict_issued","record_id":"rec_0123456789","verdict":"` + strings.Repeat("x", 300) + `"}`)
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	fmt.Println(l.Addr())
	io.Copy(io.Discard, os.Stdin)
}

// startBenchmarkServer runs serveBenchmark in a child process and returns its URL.
func startBenchmarkServer(b *testing.B) string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("benchmark server: %v", err)
	}
	return "http://" + strings.TrimSpace(addr) + "/v1/execute"
}

// runNetHTTP is Run as it was with net/http's client, the reference the benchmark compares to.
func runNetHTTP(url, token string, bodies []string, clients int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				req, _ := http.NewRequest("POST", url, strings.NewReader(bodies[i]))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() > 0 {
		return fmt.Errorf("%d requests failed", bad.Load())
	}
	return nil
}

// BenchmarkRun measures the load generator's own CPU per request (cpu-ns/op, from getrusage of
// this process; the server runs in a child process), with this package's client and with the
// net/http client it replaced. ns/op is wall time per request over 8 clients.
func BenchmarkRun(b *testing.B) {
	url := startBenchmarkServer(b)
	body := `{"verdict":"` + strings.Repeat("v", 900) + `","arguments":{"account":"1102534471"}}`
	for _, tc := range []struct {
		name string
		run  func(bodies []string) error
	}{
		{"client=raw", func(bodies []string) error { _, err := Run(url, "load", bodies, 8, nil); return err }},
		{"client=net-http", func(bodies []string) error { return runNetHTTP(url, "load", bodies, 8) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bodies := repeat(body, b.N)
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			if err := tc.run(bodies); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is this process's user + system CPU time, to the microsecond.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
