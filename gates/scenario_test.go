package gates

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/policy"
	"sigs.k8s.io/yaml"
)

// A scenario is a tool, a policy and a sequence of requests, each with the record fields it
// must produce. Requests may name question ids issued earlier as "$q:<slot_id>" (the latest
// question for that slot).
//
// Scenarios run with the CEL evaluator and a real measurer: "$HTTP" in the policy is the base
// URL of a local HTTP server (GET /balance?account=A → {"account", "balance"}, /limit likewise,
// /rate, /down answers 503), "$DOWN" a URL where nothing listens, and MCP measurements on
// server "bank" call a real examples/bank process (get_balance).
type scenario struct {
	Name   string                    `json:"name"`
	Tool   json.RawMessage           `json:"tool"`
	Policy json.RawMessage           `json:"policy"`
	Prior  map[string]map[string]any `json:"prior"`
	Steps  []step                    `json:"steps"`
	// NoEvaluator and NoMeasurer run the engine without them.
	NoEvaluator bool `json:"no_evaluator"`
	NoMeasurer  bool `json:"no_measurer"`
}

type step struct {
	Request json.RawMessage `json:"request"`
	// Trigger, instead of Request, reruns the latest deferred record at trigger time
	// (Record.TriggerRequest), with these fresh answers and pre-set data.
	Trigger *struct {
		UserAnswers json.RawMessage `json:"user_answers"`
		PreSetData  json.RawMessage `json:"pre_set_data"`
	} `json:"trigger"`
	// Balances and Limits set what the local HTTP server answers from this step on.
	Balances map[string]json.RawMessage `json:"balances"`
	Limits   map[string]json.RawMessage `json:"limits"`
	// HTTPCalls, if set, is how many measurement requests the HTTP server must receive in
	// this step.
	HTTPCalls *int64 `json:"http_calls"`
	// RunError, if set, is a substring of the error Run must return instead of a record.
	RunError string `json:"run_error"`
	// Expect is a subset of the record: objects match on the keys given, arrays element by
	// element with equal length, scalars by canonical JSON equality. "<absent>" requires the
	// key to be missing.
	Expect json.RawMessage `json:"expect"`
	// Slots matches slots by slot_id, each against a subset.
	Slots map[string]json.RawMessage `json:"slots"`
	// NotShown lists strings no user-facing message may contain.
	NotShown []string `json:"not_shown"`
	// NoSlot lists slot ids that must not be in the record.
	NoSlot []string `json:"no_slot"`
}

type seqIDs struct {
	mu sync.Mutex
	n  int
}

func (s *seqIDs) NewID(prefix string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("%s_%04d", prefix, s.n), nil
}

var fixedNow = time.Date(2026, 11, 30, 9, 12, 3, 114e6, time.UTC)

func loadSchemas(t testing.TB) (request, record *jsonschema.Schema) {
	t.Helper()
	c := jsonschema.NewCompiler()
	for _, name := range []string{"preflight-request.schema.json", "decision-record.schema.json"} {
		f, err := os.Open(filepath.Join("..", "schemas", name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(name, doc); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if request, err = c.Compile("preflight-request.schema.json"); err != nil {
		t.Fatal(err)
	}
	if record, err = c.Compile("decision-record.schema.json"); err != nil {
		t.Fatal(err)
	}
	return request, record
}

func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestScenarios(t *testing.T) {
	reqSchema, recSchema := loadSchemas(t)
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var scs []scenario
		if err := apijson.UnmarshalStrict(js, &scs); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, sc := range scs {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml")+"/"+sc.Name, func(t *testing.T) {
				runScenario(t, sc, reqSchema, recSchema)
			})
		}
	}
}

func runScenario(t *testing.T, sc scenario, reqSchema, recSchema *jsonschema.Schema) {
	env := newMeasureEnv(t)
	polText := strings.NewReplacer(`$HTTP`, env.http.URL, `$DOWN`, env.downURL).Replace(string(sc.Policy))
	pol, err := policy.Parse([]byte(polText))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	var tool Tool
	if err := json.Unmarshal(sc.Tool, &tool); err != nil {
		t.Fatalf("tool: %v", err)
	}
	st := NewMemState()
	for k, v := range sc.Prior {
		st.SetPrior(k, v)
	}
	cfg := Config{State: st, Clock: func() time.Time { return fixedNow }, IDs: &seqIDs{}}
	if !sc.NoEvaluator {
		ev, err := NewCELEvaluator()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Evaluator = ev
	}
	if !sc.NoMeasurer {
		cfg.Measurer = env.measurer(t)
	}
	eng, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]api.Question{} // slot id → latest question
	var deferred *api.Record
	for i, stp := range sc.Steps {
		env.set(stp.Balances, stp.Limits)
		body := string(stp.Request)
		if stp.Trigger != nil {
			body = triggerBody(t, deferred, stp.Trigger.UserAnswers, stp.Trigger.PreSetData)
		}
		for slot, q := range asked {
			body = strings.ReplaceAll(body, `"$q:`+slot+`"`, `"`+q.QuestionID+`"`)
			v, _ := json.Marshal(q.Value)
			body = strings.ReplaceAll(body, `"$v:`+slot+`"`, string(v))
		}
		if err := reqSchema.Validate(decodeAny(t, []byte(body))); err != nil {
			t.Fatalf("step %d: request does not validate: %v", i, err)
		}
		req, err := DecodeRequest([]byte(body), Limits{})
		if err != nil {
			t.Fatalf("step %d: decode: %v", i, err)
		}
		calls := env.hits.Load()
		// Every run is captured, as verdictd captures it with records.capture_requests on: the
		// capture passes every read on unchanged, and the run decided again from it
		// (replayed) comes to the same record.
		in, capture := eng.Capture(Input{Tool: tool, Policy: pol, Request: req})
		rec, err := eng.Run(context.Background(), in)
		if stp.RunError != "" {
			if err == nil || !strings.Contains(err.Error(), stp.RunError) {
				t.Fatalf("step %d: run error %v, want %q", i, err, stp.RunError)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: run: %v", i, err)
		}
		if rec.Outcome == api.OutcomeDeferred {
			deferred = rec
		}
		out, err := apijson.AppendRecord(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeAny(t, out)
		// The struct tags mean the same to encoding/json: a record written with apijson's record options
		// holds what one written by json.Marshal holds, member for member.
		if v1, err := json.Marshal(rec); err != nil {
			t.Fatal(err)
		} else if want := decodeAny(t, v1); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: record differs from json.Marshal's\n got: %s\nwant: %s", i, out, v1)
		}
		if err := recSchema.Validate(got); err != nil {
			t.Fatalf("step %d: record does not validate: %v\n%s", i, err, out)
		}
		var fails []string
		if stp.HTTPCalls != nil {
			if n := env.hits.Load() - calls; n != *stp.HTTPCalls {
				fails = append(fails, fmt.Sprintf("HTTP measurement calls: %d, want %d", n, *stp.HTTPCalls))
			}
		}
		if len(stp.Expect) > 0 {
			match("", decodeAny(t, stp.Expect), got, &fails)
		}
		slots, _ := got.(map[string]any)["slots"].([]any)
		byID := map[string]any{}
		for _, s := range slots {
			byID[s.(map[string]any)["slot_id"].(string)] = s
		}
		ids := make([]string, 0, len(stp.Slots))
		for id := range stp.Slots {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			s, ok := byID[id]
			if !ok {
				fails = append(fails, fmt.Sprintf("slot %s missing", id))
				continue
			}
			match("slots["+id+"]", decodeAny(t, stp.Slots[id]), s, &fails)
		}
		for _, id := range stp.NoSlot {
			if _, ok := byID[id]; ok {
				fails = append(fails, fmt.Sprintf("slot %s must not be there", id))
			}
		}
		for _, m := range userFacing(rec) {
			for _, bad := range append([]string{tool.Name}, stp.NotShown...) {
				if strings.Contains(strings.ToLower(m), strings.ToLower(bad)) {
					fails = append(fails, fmt.Sprintf("message %q shows %q", m, bad))
				}
			}
		}
		for _, q := range rec.Questions {
			asked[q.SlotID] = q
			if strings.Contains(q.QuestionID, tool.Name) {
				fails = append(fails, "question id carries the tool name")
			}
		}
		if !sc.NoMeasurer {
			fails = append(fails, replayed(t, eng, pol, tool, req, rec, capture)...)
		}
		if len(fails) > 0 {
			pretty, _ := json.MarshalIndent(rec, "", "  ")
			t.Fatalf("step %d:\n  %s\nrecord:\n%s", i, strings.Join(fails, "\n  "), pretty)
		}
	}
}

// replayed decides rec's run again from its capture, as stored and read back, and says how the
// record it comes to differs from rec: in what it decided, never in its ids.
func replayed(t *testing.T, eng *Engine, pol *policy.Policy, tool Tool, req *api.Request, rec *api.Record, capture *Capture) []string {
	t.Helper()
	c, err := capture.Result(req, tool, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := apijson.AppendCapture([]byte(`{"record_id":"x"}`), c)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Capture api.Capture `json:"capture"`
	}
	if err := apijson.Unmarshal(stored, &back); err != nil {
		t.Fatal(err)
	}
	req2, err := DecodeRequest(back.Capture.Request, Limits{})
	if err != nil {
		return []string{fmt.Sprintf("replay: the captured request does not decode: %v", err)}
	}
	var tool2 Tool
	if err := apijson.Unmarshal(back.Capture.Tool, &tool2); err != nil {
		t.Fatal(err)
	}
	rp := NewReplay(&back.Capture)
	again, err := eng.Run(context.Background(), rp.Input(Input{Tool: tool2, Policy: pol, Request: req2}))
	if err != nil {
		return []string{fmt.Sprintf("replay: %v", err)}
	}
	if m := rp.Misses(); len(m) > 0 {
		return []string{fmt.Sprintf("replay: the capture misses %v", m)}
	}
	decided := func(r *api.Record) string {
		type slot struct{ ID, Status, Source string }
		var slots []slot
		for _, s := range r.Slots {
			src := ""
			if s.Source != nil {
				src = string(*s.Source)
			}
			slots = append(slots, slot{s.SlotID, s.Status, src})
		}
		b, _ := json.Marshal(map[string]any{"outcome": r.Outcome, "gate": r.Gate.Kind, "unknown": r.UnknownCount,
			"unmet": r.Unmet, "call": r.CallArguments, "slots": slots, "rejected": len(r.RejectedAnswers), "asked": len(r.Questions)})
		return string(b)
	}
	if a, b := decided(rec), decided(again); a != b {
		return []string{"replay decided otherwise:\n    recorded " + a + "\n    replayed " + b}
	}
	return nil
}

// triggerBody is the wire form of a deferred record's trigger request.
func triggerBody(t *testing.T, prev *api.Record, answers, preSet json.RawMessage) string {
	t.Helper()
	if prev == nil {
		t.Fatal("trigger step without a deferred record before it")
	}
	var ps map[string]api.PreSet
	if len(preSet) > 0 {
		if err := apijson.Unmarshal(preSet, &ps); err != nil {
			t.Fatal(err)
		}
	}
	req, err := TriggerRequest(prev, nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) == 0 {
		return string(b)
	}
	m := decodeAny(t, b).(map[string]any)
	fresh, _ := decodeAny(t, answers).([]any)
	old, _ := m["user_answers"].([]any)
	m["user_answers"] = append(old, fresh...)
	b, _ = json.Marshal(m)
	return string(b)
}

// userFacing lists every text a user is shown.
func userFacing(rec *api.Record) []string {
	out := []string{}
	if rec.Gate.UserMessage != "" {
		out = append(out, rec.Gate.UserMessage)
	}
	for _, q := range rec.Questions {
		out = append(out, q.Message)
	}
	return out
}

func match(path string, want, got any, fails *[]string) {
	if s, ok := want.(string); ok && s == "<absent>" {
		*fails = append(*fails, path+": <absent> outside an object")
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*fails = append(*fails, fmt.Sprintf("%s: want object, got %v", path, got))
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, has := g[k]
			if s, ok := w[k].(string); ok && s == "<absent>" {
				if has {
					*fails = append(*fails, fmt.Sprintf("%s.%s: want absent, got %v", path, k, gv))
				}
				continue
			}
			if !has {
				*fails = append(*fails, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			match(path+"."+k, w[k], gv, fails)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			b, _ := json.Marshal(got)
			*fails = append(*fails, fmt.Sprintf("%s: want %d elements, got %s", path, len(w), b))
			return
		}
		for i := range w {
			match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], fails)
		}
	default:
		if !sameJSON(want, got) {
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			*fails = append(*fails, fmt.Sprintf("%s: want %s, got %s", path, wb, gb))
		}
	}
}
