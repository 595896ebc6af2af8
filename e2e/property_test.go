package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"pgregory.net/rapid"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/canonical"
	"github.com/verdictgate/verdict/executor"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/keys"
	"github.com/verdictgate/verdict/upstream"
	"github.com/verdictgate/verdict/verdict"
)

// inproc is an executor built with executor.New in this process, behind a stable test server
// that survives restarts of the service.
type inproc struct {
	cfg     executor.Config
	issuer  *issuer
	srv     *httptest.Server
	current atomic.Pointer[running] // nil while restarting
}

// running is a started service and its handler.
type running struct {
	svc     *executor.Service
	handler http.Handler
}

// newInproc prepares keys and a config for an executor whose only server is argv (stdio), with
// its data in dataDir. It does not start the service.
func newInproc(t testing.TB, keyDir, dataDir, server string, argv []string) *inproc {
	t.Helper()
	is := newIssuer(t, keyDir, issuerID)
	receipt := filepath.Join(keyDir, "receipt")
	if _, err := os.Stat(receipt); err != nil {
		if _, err := keys.Keygen(receipt, jose.EdDSA); err != nil {
			t.Fatal(err)
		}
	}
	p := &inproc{issuer: is, cfg: executor.Config{
		Listen:           "127.0.0.1:0",
		DataDir:          dataDir,
		ExecutorID:       executorID,
		TrustedIssuers:   []executor.TrustedIssuer{{Issuer: issuerID, JWKS: is.jwks}},
		ReceiptKey:       filepath.Join(receipt, keys.PrivateKeyFile),
		Servers:          map[string]upstream.Config{server: {Command: argv}},
		Callers:          []executor.Caller{{Name: "gate", TokenSHA256: httpx.HashToken(callerToken)}},
		AdminTokenSHA256: httpx.HashToken(adminToken),
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := p.current.Load()
		if cur == nil {
			httpx.WriteError(w, httpx.Errorf(http.StatusServiceUnavailable, "restarting", "the executor is restarting"))
			return
		}
		cur.handler.ServeHTTP(w, r)
	}))
	return p
}

// open starts the service on the config's data dir and lists its upstream.
func (p *inproc) open() error {
	ctx := context.Background()
	svc, err := executor.New(ctx, p.cfg, executor.Options{})
	if err != nil {
		return err
	}
	if err := svc.Refresh(ctx); err != nil {
		svc.Close(ctx)
		return err
	}
	p.current.Store(&running{svc: svc, handler: svc.Handler()})
	return nil
}

// close stops the service: in-flight executions finish and are recorded, later requests are
// refused, and the file is closed.
func (p *inproc) close() error {
	cur := p.current.Swap(nil)
	if cur == nil {
		return nil
	}
	return cur.svc.Close(context.Background())
}

func (p *inproc) restart() error {
	if err := p.close(); err != nil {
		return err
	}
	return p.open()
}

func (p *inproc) shutdown() {
	p.close()
	p.srv.Close()
}

func (p *inproc) post(body []byte) response {
	c := &client{http: p.srv.Client(), base: p.srv.URL, token: callerToken}
	return c.do(context.Background(), http.MethodPost, "/v1/execute", body)
}

// sign signs a verdict for server/tool over args.
func (p *inproc) sign(server, tool, tsd string, args []byte) (string, string, error) {
	digest, err := canonical.DigestJSON(args)
	if err != nil {
		return "", "", err
	}
	now := time.Now().Unix()
	jti, err := verdict.NewID()
	if err != nil {
		return "", "", err
	}
	tok, err := verdict.Sign(p.issuer.signer, verdict.Claims{
		Issuer: issuerID, Subject: principal, Audience: []string{executorID},
		IssuedAt: now, NotBefore: now, Expiry: now + 300, ID: jti,
		Server: server, Tool: tool, ToolDigest: tsd, Policy: "e2e.1", Arguments: digest,
		Slots: []verdict.Slot{}, ActionKey: principal + ":run:" + server + "/" + tool, Phase: "at_trigger", Record: "rec_e2e",
	})
	return tok, jti, err
}

// --- Property 5: any change to an issued call changes its digest, and the old verdict is refused.

// jsonValue generates I-JSON values whose numbers are exact: safe integers and floats written
// in their shortest round-trip form.
func jsonValue(depth int) *rapid.Generator[any] {
	leaves := []*rapid.Generator[any]{
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Int64Range(-(1<<53)+1, (1<<53)-1), func(n int64) any { return json.Number(strconv.FormatInt(n, 10)) }),
		rapid.Map(rapid.Float64Range(-1e12, 1e12), func(f float64) any { return json.Number(strconv.FormatFloat(f, 'g', -1, 64)) }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
	}
	if depth <= 0 {
		return rapid.OneOf(leaves...)
	}
	return rapid.OneOf(append(leaves,
		rapid.Map(rapid.SliceOfN(jsonValue(depth-1), 0, 4), func(s []any) any { return s }),
		rapid.Map(rapid.MapOfN(rapid.String(), jsonValue(depth-1), 0, 4), func(m map[string]any) any { return m }),
	)...)
}

// path addresses a value inside a generated object: member names (string) and indexes (int).
type path []any

// leaves returns the path of every scalar, empty array and empty object under v.
func leaves(v any, at path, out *[]path) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 && len(at) > 0 {
			*out = append(*out, at)
		}
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			leaves(x[k], append(at[:len(at):len(at)], k), out)
		}
	case []any:
		if len(x) == 0 {
			*out = append(*out, at)
		}
		for i, e := range x {
			leaves(e, append(at[:len(at):len(at)], i), out)
		}
	default:
		*out = append(*out, at)
	}
}

// clone deep-copies a generated value.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = clone(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = clone(e)
		}
		return s
	}
	return v
}

// changed returns a value that is not equal to v as JSON: another string, a number with another
// value, the other boolean, or a value of another type.
func changed(t *rapid.T, v any) any {
	switch x := v.(type) {
	case string:
		return x + rapid.StringN(1, 3, -1).Draw(t, "suffix")
	case json.Number:
		if n, ok := new(big.Int).SetString(string(x), 10); ok {
			if n.Sign() > 0 {
				return json.Number(n.Sub(n, big.NewInt(1)).String())
			}
			return json.Number(n.Add(n, big.NewInt(1)).String())
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return json.Number(strconv.FormatFloat(math.Nextafter(f, math.Inf(1)), 'g', -1, 64))
	case bool:
		return !x
	case nil:
		return rapid.SampledFrom([]any{false, json.Number("0"), "", []any{}}).Draw(t, "for-null")
	case []any:
		return map[string]any{}
	case map[string]any:
		return []any{}
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

// set replaces the value at p (non-empty) inside root.
func set(root any, p path, v any) {
	parent := root
	for _, k := range p[:len(p)-1] {
		switch k := k.(type) {
		case string:
			parent = parent.(map[string]any)[k]
		case int:
			parent = parent.([]any)[k]
		}
	}
	switch k := p[len(p)-1].(type) {
	case string:
		parent.(map[string]any)[k] = v
	case int:
		parent.([]any)[k] = v
	}
}

// TestPropertyChangedCallIsRefused: for generated argument objects, a verdict signed over the
// object is refused (arguments_mismatch) for the object with any one change — a leaf's value, a
// member added, a member removed — and then still runs the original object, whose canonical
// bytes are exactly what the tool receives.
func TestPropertyChangedCallIsRefused(t *testing.T) {
	dir := t.TempDir()
	p := newInproc(t, dir, filepath.Join(dir, "data"), "echo", []string{bins["echoserver"]})
	defer p.shutdown()
	if err := p.open(); err != nil {
		t.Fatal(err)
	}
	tsd := echoDigest(t)

	rapid.Check(t, func(rt *rapid.T) {
		orig := rapid.MapOfN(rapid.String(), jsonValue(2), 0, 6).Draw(rt, "arguments")
		origJSON, err := json.Marshal(orig)
		if err != nil {
			rt.Fatal(err)
		}
		mut := clone(orig).(map[string]any)
		var ls []path
		leaves(mut, nil, &ls)
		kinds := []string{"add"}
		if len(ls) > 0 {
			kinds = append(kinds, "leaf")
		}
		if len(orig) > 0 {
			kinds = append(kinds, "remove")
		}
		switch rapid.SampledFrom(kinds).Draw(rt, "change") {
		case "leaf":
			at := ls[rapid.IntRange(0, len(ls)-1).Draw(rt, "leaf")]
			old := any(mut)
			for _, k := range at {
				switch k := k.(type) {
				case string:
					old = old.(map[string]any)[k]
				case int:
					old = old.([]any)[k]
				}
			}
			set(mut, at, changed(rt, old))
		case "add":
			k := rapid.String().Filter(func(k string) bool { _, dup := mut[k]; return !dup }).Draw(rt, "new member")
			mut[k] = jsonValue(0).Draw(rt, "new value")
		case "remove":
			ks := make([]string, 0, len(mut))
			for k := range mut {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			delete(mut, rapid.SampledFrom(ks).Draw(rt, "removed"))
		}
		mutJSON, err := json.Marshal(mut)
		if err != nil {
			rt.Fatal(err)
		}
		d1, err1 := canonical.DigestJSON(origJSON)
		d2, err2 := canonical.DigestJSON(mutJSON)
		if err1 != nil || err2 != nil {
			rt.Fatalf("digest: %v %v", err1, err2)
		}
		if d1 == d2 {
			rt.Fatalf("a changed call has the same digest:\n%s\n%s", origJSON, mutJSON)
		}
		tok, _, err := p.sign("echo", "echo", tsd, origJSON)
		if err != nil {
			rt.Fatal(err)
		}
		if r := p.post(executeBody(tok, mutJSON)); r.status != http.StatusForbidden || r.errorCode() != "arguments_mismatch" {
			rt.Fatalf("changed call: %d %s %s", r.status, r.errorCode(), r.body)
		}
		r := p.post(executeBody(tok, origJSON))
		if r.status != http.StatusOK {
			rt.Fatalf("original call after the refusal: %d %s", r.status, r.body)
		}
		var out struct {
			Result struct {
				Content []struct{ Text string }
			}
		}
		if err := json.Unmarshal(r.body, &out); err != nil || len(out.Result.Content) != 1 {
			rt.Fatalf("echo result %s: %v", r.body, err)
		}
		want, _ := canonical.Transform(origJSON)
		if out.Result.Content[0].Text != string(want) {
			rt.Fatalf("the tool received %q, the verdict covers %q", out.Result.Content[0].Text, want)
		}
	})
}

// echoDigest lists the echo server's tools and returns echo's tsd.
func echoDigest(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	cl, err := upstream.Dial(ctx, "echo", upstream.Config{Command: []string{bins["echoserver"]}}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tools, err := cl.Tools(ctx)
	if err != nil || len(tools) != 1 {
		t.Fatalf("echo tools: %v %v", tools, err)
	}
	return tools[0].Digest
}

// --- Property 6: a verdict id executes at most once, whatever the interleaving.

// step is one step of a generated schedule: a burst of concurrent submissions, optionally with
// a restart of the executor racing them, or a restart on its own.
type step struct {
	Submit  []int // verdict indexes, submitted concurrently
	Restart bool  // restart the executor (during the burst, if there is one)
}

func schedule(nVerdicts int) *rapid.Generator[[]step] {
	st := rapid.Custom(func(t *rapid.T) step {
		return step{
			Submit:  rapid.SliceOfN(rapid.IntRange(0, nVerdicts-1), 0, 8).Draw(t, "submit"),
			Restart: rapid.IntRange(0, 3).Draw(t, "restart") == 0,
		}
	})
	return rapid.SliceOfN(st, 1, 6)
}

// TestPropertyExecutesAtMostOnce runs generated schedules of concurrent submissions, duplicates
// and restarts against an executor with a real bbolt file and a real bank server (stdio), and
// checks after each schedule that no verdict ran twice: in the answers, in the records and in
// the bank's own call log.
//
// A restart races the burst it belongs to, so besides 200 and 409 a submission can see one of
// two 503s, neither of which uses the verdict: "restarting", from this test's front while no
// service is installed, and the executor's own "shutting_down", for a request that was handed to
// a service whose Close had already begun. The executor records the latter as not_executed
// (before verification: no verdict id) while its store still takes writes, so such a record is
// accepted only for a verdict that was answered shutting_down at least as many times.
func TestPropertyExecutesAtMostOnce(t *testing.T) {
	keyDir := t.TempDir()
	tsd := directDigest(t, keyDir)
	check := 0
	var seen [600]atomic.Int64 // answers by status, over all checks
	var shuttingDown atomic.Int64
	restarts := 0
	defer func() {
		t.Logf("over %d schedules: %d restarts; answered 200: %d, 409: %d, 503: %d (shutting_down: %d)", check, restarts,
			seen[200].Load(), seen[409].Load(), seen[503].Load(), shuttingDown.Load())
	}()
	rapid.Check(t, func(rt *rapid.T) {
		check++
		dir := filepath.Join(keyDir, fmt.Sprint("check", check))
		bankLog := filepath.Join(dir, "bank.log")
		p := newInproc(t, keyDir, filepath.Join(dir, "data"), "bank",
			[]string{bins["bank"], "--state", filepath.Join(dir, "bank.json"), "--log", bankLog})
		defer p.shutdown()
		if err := p.open(); err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 4).Draw(rt, "verdicts")
		jtis := make([]string, n)
		bodies := make([][]byte, n)
		byDigest := map[string]int{}
		byToken := map[string]int{}
		for i := range n {
			args := fmt.Appendf(nil, `{"amount":1,"from_account":"1102534471","memo":"v%d","to_account":"220-555-010"}`, i)
			tok, jti, err := p.sign("bank", "transfer", tsd, args)
			if err != nil {
				rt.Fatal(err)
			}
			d, _ := canonical.DigestJSON(args)
			jtis[i], bodies[i], byDigest[d], byToken[tok] = jti, executeBody(tok, args), i, i
		}

		// answer is what one submission was told: its status and, for a refusal, its code.
		type answer struct {
			status int
			code   string
		}
		var mu sync.Mutex
		answers := make([]map[answer]int, n)
		for i := range answers {
			answers[i] = map[answer]int{}
		}
		for _, s := range schedule(n).Draw(rt, "schedule") {
			var wg sync.WaitGroup
			for _, i := range s.Submit {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := p.post(bodies[i])
					a := answer{status: r.status}
					if r.status != http.StatusOK {
						a.code = r.errorCode()
					}
					mu.Lock()
					answers[i][a]++
					mu.Unlock()
					if r.status > 0 && r.status < len(seen) {
						seen[r.status].Add(1)
					}
					if a.code == api.CodeShuttingDown {
						shuttingDown.Add(1)
					}
				}()
			}
			if s.Restart {
				restarts++
				if err := p.restart(); err != nil {
					rt.Fatalf("restart: %v", err)
				}
			}
			wg.Wait()
		}
		if err := p.close(); err != nil {
			rt.Fatal(err)
		}

		recs, nonces := readExecutorFile(rt, filepath.Join(dir, "data", executor.DBFile))
		runs := map[string]int{}
		shutdownRecords := make([]int, n)
		for _, x := range recs {
			switch {
			case x.Decision == api.ExecutionStarted:
				rt.Errorf("record %s still started after a graceful close", x.RecordID)
			case x.Decision == api.ExecutionNotExecuted && x.Reason == api.CodeShuttingDown:
				i, ours := byToken[x.Verdict]
				if !ours || x.VerdictID != "" {
					rt.Errorf("shutting_down record %s: verdict id %q, token ours: %v", x.RecordID, x.VerdictID, ours)
					continue
				}
				if d, _ := canonical.DigestJSON(argsOf(rt, bodies[i])); x.ArgumentsDigest != d {
					rt.Errorf("shutting_down record %s of verdict %d has arguments digest %s, want %s", x.RecordID, i, x.ArgumentsDigest, d)
				}
				shutdownRecords[i]++
			case x.Decision == api.ExecutionNotExecuted:
				if x.Reason != "replayed" {
					rt.Errorf("verdict %s refused: %s", x.VerdictID, x.Reason)
				}
			default:
				runs[x.VerdictID]++
				if !nonces[x.VerdictID] {
					rt.Errorf("verdict %s ran without its nonce consumed", x.VerdictID)
				}
			}
		}
		for jti := range nonces {
			if runs[jti] == 0 {
				rt.Errorf("nonce %s is consumed but no execution record claims it", jti)
			}
		}
		calls := map[int]int{}
		for _, l := range readCallLog(rt, bankLog) {
			d, err := canonical.DigestJSON([]byte(l.Arguments))
			if i, ok := byDigest[d]; err == nil && ok {
				calls[i]++
			} else {
				rt.Errorf("the bank received a call no verdict covers: %s", l.Arguments)
			}
		}
		for i, jti := range jtis {
			st := answers[i]
			ok := st[answer{status: http.StatusOK}]
			conflicts := 0
			for a, k := range st {
				switch {
				case a.status == http.StatusOK:
				case a.status == http.StatusConflict && a.code == "replayed":
					conflicts += k
				case a.status == http.StatusServiceUnavailable && (a.code == "restarting" || a.code == api.CodeShuttingDown):
				default:
					rt.Errorf("verdict %d answered %d %q", i, a.status, a.code)
				}
			}
			if ok > 1 || runs[jti] > 1 || calls[i] > 1 {
				rt.Fatalf("verdict %d ran more than once: answers %v, records %d, bank calls %d", i, st, runs[jti], calls[i])
			}
			if ok != runs[jti] || runs[jti] != calls[i] {
				rt.Errorf("verdict %d: answers %v, %d execution records, %d bank calls", i, st, runs[jti], calls[i])
			}
			if conflicts > 0 && runs[jti] != 1 {
				rt.Errorf("verdict %d refused as replayed but never ran", i)
			}
			// A shutting_down answer may come without a record (the store had closed), never
			// a record without its answer.
			if told := st[answer{http.StatusServiceUnavailable, api.CodeShuttingDown}]; shutdownRecords[i] > told {
				rt.Errorf("verdict %d: %d shutting_down records for %d shutting_down answers", i, shutdownRecords[i], told)
			}
		}
		os.RemoveAll(dir)
	})
}

// argsOf returns the arguments of an execute body.
func argsOf(t tb, body []byte) []byte {
	t.Helper()
	var req struct{ Arguments json.RawMessage }
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("execute body %s: %v", body, err)
	}
	return req.Arguments
}
