package store

import (
	"bytes"
	"testing"
	"time"
)

func FuzzExecutionJSON(f *testing.F) {
	f.Add("exe_01", "executor-bank", "jti", "u_01:send money:bank/transfer", "at_trigger", "rec_1", "u_01",
		"bank", "transfer", "sha256:ab", "executed", "", "sha256:cd", "eyJ.eyJ.sig", int64(1_700_000_000_123_456_789), int64(0))
	f.Add("<&>\u2028\u2029", "\x00\x1f\"\\\b\f\n\r\t", "\xff\xfe", "é日本", "\x7f", "", "", "", "", "", "started",
		"a\u2029b", "", "", int64(-62135596800_000_000_0), int64(1))
	f.Fuzz(func(t *testing.T, id, executor, jti, akey, phase, rec, principal, server, tool, args, decision, reason,
		result, token string, started, finished int64) {
		x := &Execution{
			RecordID: id, ExecutorID: executor, VerdictID: jti, ActionKey: akey, RefPhase: phase, RefRecord: rec,
			Principal: principal, Server: server, Tool: tool, ArgumentsDigest: args,
			Decision: ExecutionDecision(decision), Reason: reason, ResultDigest: result, Verdict: token,
			StartedAt: time.Unix(0, started).In(time.FixedZone("x", 3600)),
		}
		if finished != 0 {
			x.FinishedAt = time.Unix(0, finished)
		}
		want, werr := x.marshalReflect()
		got, ok := appendExecution(nil, x)
		if !ok {
			if werr == nil {
				t.Fatalf("appendExecution refused what encoding/json encodes: %s", want)
			}
			return
		}
		if werr != nil {
			t.Fatalf("appendExecution encoded what encoding/json refuses (%v): %s", werr, got)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encodings differ:\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkExecutionJSON(b *testing.B) {
	x := &Execution{RecordID: "exe_01JABCDEFGHJKMNPQRSTVWXYZ0", ExecutorID: "executor-bank", VerdictID: "bmV2ZXItaXNzdWVkLXZlcmRpY3Q",
		ActionKey: "u_01:send money:bank/transfer", RefPhase: "at_trigger", RefRecord: "rec_01JABCDEFGHJKMNPQRSTVWXYZ0",
		Principal: "u_01", Server: "bank", Tool: "transfer", ArgumentsDigest: "sha256:" + string(bytes.Repeat([]byte("ab"), 32)),
		Decision: Executed, StartedAt: time.Now(), FinishedAt: time.Now(), Verdict: string(bytes.Repeat([]byte("e"), 700))}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := x.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := x.marshalReflect(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
