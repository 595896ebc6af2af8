package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/store"
)

// benchRecords is the size of the benchmark's record set: decisions, a third of them issued,
// and an execution (plus a refused replay) for every other issued verdict.
const benchRecords = 30_000

// benchSet writes the set as a bbolt file and a JSONL export of decisions and a JSONL export
// of executions, once per benchmark run.
func benchSet(b *testing.B) (boltDecisions, jsonlDecisions, jsonlExecutions string) {
	b.Helper()
	dir := b.TempDir()
	boltDecisions = dir + "/verdictd.db"
	jsonlDecisions = dir + "/records.jsonl"
	jsonlExecutions = dir + "/executions.jsonl"

	db, err := store.Open(boltDecisions, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	df, err := os.Create(jsonlDecisions)
	if err != nil {
		b.Fatal(err)
	}
	xf, err := os.Create(jsonlExecutions)
	if err != nil {
		b.Fatal(err)
	}
	dw, xw := bufio.NewWriter(df), bufio.NewWriter(xf)
	const batch = 1000
	for start := 0; start < benchRecords; start += batch {
		var decs []dec
		for i := start; i < start+batch && i < benchRecords; i++ {
			rec := fmt.Sprintf("rec_%08d", i)
			d := decided(rec, "ask_user", "", "")
			if i%3 == 0 {
				vid := fmt.Sprintf("v_%08d", i)
				d = issued(rec, vid, d1)
				if i%2 == 0 {
					for _, x := range []api.ExecutionRecord{
						exe("exe_"+rec, vid, rec, d1, api.ExecutionExecuted),
						exe("exe_r_"+rec, vid, rec, d1, api.ExecutionNotExecuted),
					} {
						line, err := json.Marshal(&x)
						if err != nil {
							b.Fatal(err)
						}
						xw.Write(append(line, '\n'))
					}
				}
			}
			d.meta.Time = t0.Add(time.Duration(i) * time.Millisecond)
			decs = append(decs, d)
			dw.Write(append(d.json(b), '\n'))
		}
		err := db.Update(context.Background(), func(tx *bolt.Tx) error {
			for _, d := range decs {
				if err := db.Decisions().AppendTx(tx, d.meta, d.json(b)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, err := range []error{dw.Flush(), xw.Flush(), df.Close(), xf.Close(), db.Close(context.Background())} {
		if err != nil {
			b.Fatal(err)
		}
	}
	return boltDecisions, jsonlDecisions, jsonlExecutions
}

// BenchmarkRun audits the whole set; records/s counts decision and execution records read.
func BenchmarkRun(b *testing.B) {
	boltDecisions, jsonlDecisions, jsonlExecutions := benchSet(b)
	executions := benchRecords / 3 / 2 * 2
	for _, bc := range []struct{ name, decisions string }{
		{"bbolt", boltDecisions},
		{"jsonl", jsonlDecisions},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := Run(context.Background(), []Source{file(bc.decisions)}, []Source{file(jsonlExecutions)}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if !r.Clean || r.Decisions.Total != benchRecords {
					b.Fatalf("report = %+v", r.Anomalies)
				}
			}
			b.ReportMetric(float64(b.N)*float64(benchRecords+executions)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
