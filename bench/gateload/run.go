package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/verdictgate/verdict/bench/internal/loadgen"
)

// callTimeout bounds one call; a call past it fails the run's count, not the run.
const callTimeout = time.Minute

// host is one client: a go-sdk client with a session to the bank and one to the gateway.
type host struct {
	direct, gate *mcp.ClientSession
	asked        *atomic.Int64 // questions the gateway put to this host
}

// errAsked is the answer to a question: a gated call of the run must need none.
var errAsked = errors.New("the gateway asked a question")

// modeCalls makes one call of each mode.
var modeCalls = map[string]func(context.Context, *host) error{
	"direct": func(ctx context.Context, h *host) error {
		return check(h.direct.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: map[string]any{"account": account}}))
	},
	"read": func(ctx context.Context, h *host) error {
		return check(h.gate.CallTool(ctx, &mcp.CallToolParams{Name: "bank.get_balance", Arguments: map[string]any{"account": account}}))
	},
	"gated": func(ctx context.Context, h *host) error {
		return check(h.gate.CallTool(ctx, &mcp.CallToolParams{Name: "bank.list_transactions", Meta: gatedMeta,
			Arguments: map[string]any{"account": account, "limit": 5}}))
	},
}

// gatedMeta grounds limit in what the user said.
var gatedMeta = mcp.Meta{
	"io.verdict/instruction": []map[string]any{{"text": said, "trust": "user", "origin": "chat"}},
	"io.verdict/locations":   map[string]any{"limit": map[string]any{"segment": 0, "span": span(said, "5")}},
}

// span is where sub is in text, in characters.
func span(text, sub string) []int {
	i := strings.Index(text, sub)
	if i < 0 {
		panic("no " + sub + " in " + text)
	}
	start := utf8.RuneCountInString(text[:i])
	return []int{start, start + utf8.RuneCountInString(sub)}
}

// check turns a tool error result into an error.
func check(res *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		msg := "tool error"
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				msg = t.Text
			}
		}
		return errors.New(msg)
	}
	return nil
}

// bearer adds the host's token to every request to the gateway.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+hostToken)
	return b.base.RoundTrip(r)
}

// connect opens a host's two sessions.
func connect(ctx context.Context, s *stack) (*host, error) {
	h := &host{asked: new(atomic.Int64)}
	transport := &http.Transport{MaxIdleConnsPerHost: 4}
	client := mcp.NewClient(&mcp.Implementation{Name: "gateload", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			h.asked.Add(1)
			schema, _ := json.Marshal(req.Params.RequestedSchema)
			return nil, fmt.Errorf("%w: %q %s", errAsked, req.Params.Message, schema)
		},
	})
	var err error
	if h.direct, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.bankURL,
		HTTPClient: &http.Client{Transport: transport}}, nil); err != nil {
		return nil, fmt.Errorf("connect to the bank: %w", err)
	}
	if h.gate, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.gateURL,
		HTTPClient: &http.Client{Transport: bearer{transport}}}, nil); err != nil {
		h.direct.Close()
		return nil, fmt.Errorf("connect to the gateway: %w", err)
	}
	return h, nil
}

func (h *host) close() {
	h.direct.Close()
	h.gate.Close()
}

// tally is what one mode measured over all its turns.
type tally struct {
	lat      []time.Duration
	failed   int
	firstErr error
	elapsed  time.Duration
	cpu      map[string]time.Duration // by process name; "load" is this process
}

// sampleCPU reads the CPU time every process of the stack and this one have used.
func sampleCPU(s *stack) map[string]time.Duration {
	m := map[string]time.Duration{"load": loadgen.SelfCPU()}
	for name, pid := range s.pids {
		m[name] = loadgen.PidCPU(pid)
	}
	return m
}

// turn makes n calls of one mode from every host, each host calling as soon as its previous
// call returned, and adds them to t.
func turn(hosts []*host, call func(context.Context, *host) error, n int, t *tally) {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, h := range hosts {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				t0 := time.Now()
				errs[i] = call(ctx, h)
				lat[i] = time.Since(t0)
				cancel()
			}
		})
	}
	wg.Wait()
	t.elapsed += time.Since(start)
	t.lat = append(t.lat, lat...)
	for _, err := range errs {
		if err != nil {
			t.failed++
			t.firstErr = cmp.Or(t.firstErr, err)
		}
	}
}

// side is one stack under load, the current revision's or the base's: its hosts, each with
// its own sessions, and what every mode measured on it.
type side struct {
	suffix  string // "" for the current revision, "@base" for the base
	s       *stack
	hosts   []*host
	tallies map[string]*tally
}

// direct is the side's direct p50, or 0 when direct did not run.
func (sd *side) direct() time.Duration {
	if t := sd.tallies["direct"]; t != nil {
		return t.result().Pct(0.50)
	}
	return 0
}

// stats is what the ratio and floor lines compare of mode m on the side.
func (sd *side) stats(m string) modeStats {
	t := sd.tallies[m]
	r := t.result()
	st := modeStats{p50: r.Pct(0.50), throughput: throughput(r)}
	for _, d := range daemons {
		st.daemons += t.perCall(d)
	}
	if direct := sd.direct(); direct > 0 {
		st.added, st.hasAdded = st.p50-direct, true
	}
	return st
}

func run(o options) error {
	var baseHash string
	if o.base != "" {
		// Resolved first, so that a revision that does not exist fails before anything builds.
		out, err := exec.Command("git", "rev-parse", "--verify", "--quiet", o.base+"^{commit}").Output()
		if err != nil {
			return fmt.Errorf("-base %s: not a commit of this repository (%w)", o.base, err)
		}
		baseHash = strings.TrimSpace(string(out))
	}
	dir, err := os.MkdirTemp("", "gateload-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("dir:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := loadgen.BuildIn("", dir, binaries); err != nil {
		return err
	}
	s, err := startStack(dir, o)
	if err != nil {
		return err
	}
	defer s.stop()
	sides := []*side{{s: s}}
	if o.base != "" {
		baseDir := filepath.Join(dir, "base")
		if err := buildBase(dir, baseDir, baseHash); err != nil {
			return err
		}
		b, err := startStack(baseDir, o)
		if err != nil {
			return fmt.Errorf("base %s: %w", o.base, err)
		}
		defer b.stop()
		sides = append(sides, &side{suffix: "@base", s: b})
	}

	ctx := context.Background()
	for _, sd := range sides {
		err := sd.connect(ctx, o)
		defer sd.close()
		if err != nil {
			return err
		}
	}
	var floor *floorMeter
	if o.floors && slices.Contains(o.modes, "gated") {
		if floor, err = openFloor(dir); err != nil {
			return err
		}
		defer floor.db.Close()
	}

	if s.spans != nil {
		s.spans.Reset()
	}
	profiled := startProfiles(s, o)
	if err := runTurns(o, sides, floor); err != nil {
		return err
	}
	for _, wait := range profiled {
		if err := wait(); err != nil {
			fmt.Fprintln(os.Stderr, "gateload: cpu profile:", err)
		}
	}
	head := fmt.Sprintf("gateload: %d calls per mode, clients=%d, turns of %d, %d cores, questions asked %d",
		o.n, o.clients, o.block, runtime.NumCPU(), asked(sides))
	if o.base != "" {
		head += fmt.Sprintf(", base %s (%.12s)", o.base, baseHash)
	}
	var floors *floorTally
	if floor != nil {
		floors = &floor.tally
	}
	report(os.Stdout, head, o.modes, sides, floors)
	if s.spans != nil {
		// The daemons export what they buffered as they stop; the tally is closed after them.
		for i := len(s.stops) - 1; i >= 1; i-- {
			s.stops[i]()
		}
		s.stops = s.stops[:1]
		s.spans.Print(os.Stdout)
	}
	return failures(o, sides)
}

// connect opens the side's hosts and makes one call of each mode on the first: a setup fault
// shows at once, and the gateway has listed the bank's tools before anything is timed.
func (sd *side) connect(ctx context.Context, o options) error {
	sd.tallies = map[string]*tally{}
	for range o.clients {
		h, err := connect(ctx, sd.s)
		if err != nil {
			return err
		}
		sd.hosts = append(sd.hosts, h)
	}
	for _, m := range o.modes {
		if err := modeCalls[m](ctx, sd.hosts[0]); err != nil {
			return fmt.Errorf("first %s%s call: %w (run with -keep and see the logs)", m, sd.suffix, err)
		}
		sd.tallies[m] = &tally{cpu: map[string]time.Duration{}}
	}
	return nil
}

// close closes the side's hosts.
func (sd *side) close() {
	for _, h := range sd.hosts {
		h.close()
	}
}

// startProfiles starts the CPU profiles -cpuprofile asks for; each returned function waits for
// one.
func startProfiles(s *stack, o options) []func() error {
	var profiled []func() error
	for name, addr := range s.debugAddr {
		path := o.cpuprofile
		if len(s.debugAddr) > 1 {
			path = fmt.Sprintf("%s.%s.pprof", o.cpuprofile, name)
		}
		profiled = append(profiled, loadgen.Profile(addr, path, o.profsec))
	}
	return profiled
}

// runTurns makes every mode's calls on every side, in turns of -block, the sides' order
// alternating from turn to turn, and measures the floors between turns.
func runTurns(o options, sides []*side, floor *floorMeter) error {
	for i, done := 0, 0; done < o.n; i, done = i+1, done+o.block {
		n := min(o.block, o.n-done)
		order := turnOrder(i, len(sides))
		for _, m := range o.modes {
			for _, k := range order {
				sd := sides[k]
				t := sd.tallies[m]
				before := sampleCPU(sd.s)
				turn(sd.hosts, modeCalls[m], n, t)
				for name, v := range sampleCPU(sd.s) {
					t.cpu[name] += v - before[name]
				}
			}
		}
		// Between turns, while no call runs.
		if floor != nil {
			if err := floor.measure(floorCommits, floorSigs); err != nil {
				return err
			}
		}
	}
	return nil
}

// asked counts the questions the gateways put to the hosts.
func asked(sides []*side) int64 {
	var n int64
	for _, sd := range sides {
		for _, h := range sd.hosts {
			n += h.asked.Load()
		}
	}
	return n
}

// failures is the run's error when calls failed.
func failures(o options, sides []*side) error {
	var failed []string
	for _, sd := range sides {
		for _, m := range o.modes {
			if t := sd.tallies[m]; t.failed > 0 {
				failed = append(failed, fmt.Sprintf("%s%s: %d failed, the first: %v", m, sd.suffix, t.failed, t.firstErr))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%v (run with -keep and see the logs)", failed)
	}
	return nil
}

// perCall is process name's CPU per call of the tally.
func (t *tally) perCall(name string) time.Duration {
	return t.cpu[name] / time.Duration(max(len(t.lat), 1))
}

// result returns t's latencies sorted, as a loadgen result.
func (t *tally) result() loadgen.Result {
	r := loadgen.Result{N: len(t.lat), Bad: t.failed, Elapsed: t.elapsed, Lat: slices.Clone(t.lat)}
	slices.Sort(r.Lat)
	return r
}
