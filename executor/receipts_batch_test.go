package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/confx"
)

// batchVerdictd is a stand-in for verdictd's receipt endpoints: answer decides, for each
// request, the status and the items of a batch; single posts are accepted. It records what it
// was sent.
type batchVerdictd struct {
	mu      sync.Mutex
	batches [][]string // the receipts of each batch request, in order
	singles []string
	answer  func(n int, receipts []string) (status int, items []api.ReceiptItem)
}

func (v *batchVerdictd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	defer v.mu.Unlock()
	switch r.URL.Path {
	case "/v1/receipts":
		v.singles = append(v.singles, string(body))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"accepted":true}`)
	case "/v1/receipts/batch":
		var b api.ReceiptBatch
		if err := json.Unmarshal(body, &b); err != nil || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "bad batch", http.StatusBadRequest)
			return
		}
		v.batches = append(v.batches, b.Receipts)
		status, items := v.answer(len(v.batches), b.Receipts)
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"code":"c%d","message":"m"}}`, status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(api.ReceiptBatchResult{Results: items})
	default:
		http.NotFound(w, r)
	}
}

func (v *batchVerdictd) sent() (batches [][]string, singles []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.batches), slices.Clone(v.singles)
}

// accepted answers every receipt of a batch 200.
func accepted(_ int, receipts []string) (int, []api.ReceiptItem) {
	items := make([]api.ReceiptItem, len(receipts))
	for i := range items {
		items[i] = api.ReceiptItem{Status: http.StatusOK, Result: &api.ReceiptResult{Accepted: true}}
	}
	return http.StatusOK, items
}

func newBatchSink(t *testing.T, v *batchVerdictd, logs io.Writer) *receiptSink {
	t.Helper()
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	zero := confx.Duration(0)
	sink, err := newReceiptSink(ReceiptSink{URL: srv.URL, Token: "t", BatchDelay: &zero}, nil,
		slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sink.retryDelay = 0
	return sink
}

// jobs queues n receipts r0…r(n-1) on the sink.
func jobs(sink *receiptSink, n int) {
	for i := range n {
		sink.enqueue(fmt.Sprintf("r%d.x.y", i), fmt.Sprintf("v%d", i))
	}
}

// next takes one batch as the sink's goroutine would.
func next(sink *receiptSink) []receiptJob {
	return sink.gather(context.Background(), <-sink.queue)
}

// TestReceiptBatchGathers: what is queued goes in one batch, in order, up to the batch limit;
// the rest in the next one. A batch of one is posted alone.
func TestReceiptBatchGathers(t *testing.T) {
	v := &batchVerdictd{answer: accepted}
	sink := newBatchSink(t, v, io.Discard)
	jobs(sink, api.MaxReceiptBatch+6)
	first, second := next(sink), next(sink)
	if len(first) != api.MaxReceiptBatch || len(second) != 6 || first[0].token != "r0.x.y" || second[5].verdictID != fmt.Sprint("v", api.MaxReceiptBatch+5) {
		t.Fatalf("batches of %d and %d", len(first), len(second))
	}
	sink.deliverBatch(context.Background(), first)
	sink.deliverBatch(context.Background(), second)
	jobs(sink, 1)
	sink.deliverBatch(context.Background(), next(sink))
	batches, singles := v.sent()
	if len(batches) != 2 || len(batches[0]) != api.MaxReceiptBatch || len(batches[1]) != 6 || batches[1][0] != fmt.Sprintf("r%d.x.y", api.MaxReceiptBatch) {
		t.Fatalf("batches %v", batches)
	}
	if len(singles) != 1 || singles[0] != "r0.x.y" {
		t.Fatalf("singles %q", singles)
	}
}

// TestReceiptBatchWaits: with a delay, the first receipt waits for the others, and a full batch
// goes without waiting out the delay.
func TestReceiptBatchWaits(t *testing.T) {
	v := &batchVerdictd{answer: accepted}
	sink := newBatchSink(t, v, io.Discard)
	sink.batchDelay = 24 * time.Hour // never, in a test: only a full batch ends the wait
	jobs(sink, 1)
	got := make(chan []receiptJob)
	go func() { got <- next(sink) }()
	for i := 1; i < api.MaxReceiptBatch; i++ {
		sink.enqueue(fmt.Sprintf("r%d.x.y", i), "v")
	}
	if b := <-got; len(b) != api.MaxReceiptBatch {
		t.Fatalf("a batch of %d", len(b))
	}
	// Closing the sink ends the wait with what was gathered.
	jobs(sink, 2)
	go func() { got <- next(sink) }()
	sink.close()
	if b := <-got; len(b) < 1 || len(b) > 2 {
		t.Fatalf("a batch of %d after close", len(b))
	}
}

// TestReceiptBatchItems: each receipt of a batch is judged by its own item, as a single post's
// answer would be: accepted ones are done, a final refusal is logged and dropped, one that may
// pass is tried again (alone in the next batch), and one that keeps failing is reported as not
// delivered after the last attempt.
func TestReceiptBatchItems(t *testing.T) {
	item := func(status int, code string) api.ReceiptItem {
		if status == http.StatusOK {
			return api.ReceiptItem{Status: status, Result: &api.ReceiptResult{Accepted: true}}
		}
		return api.ReceiptItem{Status: status, Error: &api.ErrorDetail{Code: code, Message: "m"}}
	}
	v := &batchVerdictd{answer: func(n int, receipts []string) (int, []api.ReceiptItem) {
		var items []api.ReceiptItem
		for _, r := range receipts {
			switch {
			case strings.HasPrefix(r, "r1."):
				items = append(items, item(http.StatusForbidden, "bad_signature"))
			case strings.HasPrefix(r, "r2.") && n < 3:
				items = append(items, item(http.StatusServiceUnavailable, "state_store_unavailable"))
			case strings.HasPrefix(r, "r3."):
				items = append(items, item(http.StatusTooManyRequests, "busy"))
			default:
				items = append(items, item(http.StatusOK, ""))
			}
		}
		return http.StatusOK, items
	}}
	var logs syncBuffer
	sink := newBatchSink(t, v, &logs)
	jobs(sink, 4)
	sink.deliverBatch(context.Background(), next(sink))
	batches, singles := v.sent()
	want := [][]string{{"r0.x.y", "r1.x.y", "r2.x.y", "r3.x.y"}, {"r2.x.y", "r3.x.y"}, {"r2.x.y", "r3.x.y"}, {"r3.x.y"}}
	if fmt.Sprint(batches) != fmt.Sprint(want) || len(singles) != 0 {
		t.Fatalf("batches %v, singles %v, want %v", batches, singles, want)
	}
	out := logs.String()
	for _, w := range []string{
		`"msg":"verdictd refused the receipt; not retried","verdict_id":"v1","attempt":1,"status":403,"code":"bad_signature"`,
		`"msg":"receipt not delivered to verdictd","verdict_id":"v3","attempt":4,"status":429,"code":"busy"`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("logs lack %s:\n%s", w, out)
		}
	}
	if strings.Contains(out, `"verdict_id":"v0"`) || strings.Count(out, `"verdict_id":"v2"`) != 2 {
		t.Errorf("logs:\n%s", out)
	}
}

// TestReceiptBatchRefusedWhole: a refusal of the whole batch counts for each receipt in it: a
// final one ends them all, one that may pass tries them all again, and an answer with the wrong
// number of items is no answer.
func TestReceiptBatchRefusedWhole(t *testing.T) {
	tests := []struct {
		name     string
		answer   func(int, []string) (int, []api.ReceiptItem)
		requests int
		want     string
	}{
		{"unauthorized", func(int, []string) (int, []api.ReceiptItem) { return http.StatusUnauthorized, nil }, 1,
			"verdictd refused the receipt; not retried"},
		{"unavailable, then accepted", func(n int, r []string) (int, []api.ReceiptItem) {
			if n == 1 {
				return http.StatusServiceUnavailable, nil
			}
			return accepted(n, r)
		}, 2, "deliver receipt to verdictd; retrying"},
		{"too few items", func(n int, r []string) (int, []api.ReceiptItem) {
			_, items := accepted(n, r)
			return http.StatusOK, items[1:]
		}, receiptAttempts, "receipt not delivered to verdictd"},
		{"an item that says nothing", func(n int, r []string) (int, []api.ReceiptItem) {
			_, items := accepted(n, r)
			items[1] = api.ReceiptItem{Status: http.StatusOK}
			return http.StatusOK, items
		}, receiptAttempts, "receipt not delivered to verdictd"},
		{"an item with no status", func(n int, r []string) (int, []api.ReceiptItem) {
			_, items := accepted(n, r)
			items[2] = api.ReceiptItem{Error: &api.ErrorDetail{Code: "x"}}
			return http.StatusOK, items
		}, receiptAttempts, "receipt not delivered to verdictd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &batchVerdictd{answer: tt.answer}
			var logs syncBuffer
			sink := newBatchSink(t, v, &logs)
			jobs(sink, 3)
			sink.deliverBatch(context.Background(), next(sink))
			batches, singles := v.sent()
			if len(batches) != tt.requests || len(singles) != 0 {
				t.Fatalf("%d batches, %d singles, want %d batches", len(batches), len(singles), tt.requests)
			}
			for _, id := range []string{"v0", "v1", "v2"} {
				if !strings.Contains(logs.String(), `"msg":"`+tt.want+`","verdict_id":"`+id+`"`) {
					t.Errorf("no %q for %s:\n%s", tt.want, id, logs.String())
				}
			}
		})
	}
}

// TestReceiptBatchOlderVerdictd: a verdictd without the batch endpoint (404) gets the batch's
// receipts one by one, and every later batch too, without asking again.
func TestReceiptBatchOlderVerdictd(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			v := &batchVerdictd{answer: func(int, []string) (int, []api.ReceiptItem) { return status, nil }}
			sink := newBatchSink(t, v, io.Discard)
			jobs(sink, 3)
			sink.deliverBatch(context.Background(), next(sink))
			jobs(sink, 2)
			sink.deliverBatch(context.Background(), next(sink))
			batches, singles := v.sent()
			if len(batches) != 1 || len(singles) != 5 || singles[0] != "r0.x.y" || singles[4] != "r1.x.y" {
				t.Fatalf("batches %v singles %q", batches, singles)
			}
		})
	}
}

// TestReceiptBatchRefusedWholeGoesAlone: a batch refused whole with a final status other than
// 401 or 403 (one bad receipt in it, or a proxy's limit on its size or type) applied nothing, so
// each of its receipts is posted alone and gets its own answer.
func TestReceiptBatchRefusedWholeGoesAlone(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			v := &batchVerdictd{answer: func(int, []string) (int, []api.ReceiptItem) { return status, nil }}
			sink := newBatchSink(t, v, io.Discard)
			jobs(sink, 3)
			sink.deliverBatch(context.Background(), next(sink))
			batches, singles := v.sent()
			if len(batches) != 1 || fmt.Sprint(singles) != "[r0.x.y r1.x.y r2.x.y]" {
				t.Fatalf("batches %v singles %q", batches, singles)
			}
		})
	}
}

// TestReceiptSinkFlushesWhenStopped: receipts the sink was gathering, and those queued behind
// them, are delivered when the executor stops, though the run's context has ended and the batch
// delay has not passed.
func TestReceiptSinkFlushesWhenStopped(t *testing.T) {
	for _, how := range []string{"context", "close"} {
		t.Run(how, func(t *testing.T) {
			v := &batchVerdictd{answer: accepted}
			var logs syncBuffer
			sink := newBatchSink(t, v, &logs)
			sink.batchDelay = 24 * time.Hour
			sink.flushTime = time.Hour // only the deliveries end the flush, in a test
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); sink.run(ctx) }()
			jobs(sink, api.MaxReceiptBatch+3)
			if how == "context" {
				cancel()
			} else {
				sink.close()
			}
			<-done
			cancel()
			batches, singles := v.sent()
			n := len(singles)
			for _, b := range batches {
				n += len(b)
			}
			if n != api.MaxReceiptBatch+3 || strings.Contains(logs.String(), "not delivered") {
				t.Fatalf("%d of %d delivered (batches %d, singles %d)\n%s", n, api.MaxReceiptBatch+3, len(batches), len(singles), logs.String())
			}
		})
	}
}
