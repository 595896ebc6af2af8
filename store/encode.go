package store

import (
	"time"
	"unicode/utf8"
)

// appendExecution appends the CONTRACT §7 JSON of x to b: byte for byte what encoding/json
// writes for executionJSON (the fuzz target FuzzExecutionJSON holds it to that), without
// reflection. Every execution is encoded twice on its way through the executor (started, then
// finished), so this is on the hot path. ok is false for a time encoding/json refuses (a year
// outside 0–9999); the caller then takes the encoding/json path and its error.
func appendExecution(b []byte, x *Execution) (_ []byte, ok bool) {
	started := x.StartedAt.UTC()
	if !jsonTimeOK(started) || (!x.FinishedAt.IsZero() && !jsonTimeOK(x.FinishedAt.UTC())) {
		return b, false
	}
	b = append(b, `{"record_id":`...)
	b = appendJSONString(b, x.RecordID)
	b = append(b, `,"actor":"`+executionActor+`","executor_id":`...)
	b = appendJSONString(b, x.ExecutorID)
	b = appendNullable(append(b, `,"verdict_id":`...), x.VerdictID)
	b = appendNullable(append(b, `,"action_key":`...), x.ActionKey)
	b = appendNullable(append(b, `,"ref_phase":`...), x.RefPhase)
	b = appendNullable(append(b, `,"ref_record":`...), x.RefRecord)
	b = appendNullable(append(b, `,"principal":`...), x.Principal)
	b = appendNullable(append(b, `,"server":`...), x.Server)
	b = appendNullable(append(b, `,"tool":`...), x.Tool)
	b = appendNullable(append(b, `,"arguments_digest":`...), x.ArgumentsDigest)
	b = appendJSONString(append(b, `,"execution_decision":`...), string(x.Decision))
	b = appendNullable(append(b, `,"reason":`...), x.Reason)
	b = append(b, `,"started_at":"`...)
	b = append(started.AppendFormat(b, time.RFC3339Nano), '"')
	b = append(b, `,"finished_at":`...)
	if x.FinishedAt.IsZero() {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(x.FinishedAt.UTC().AppendFormat(b, time.RFC3339Nano), '"')
	}
	b = appendNullable(append(b, `,"result_digest":`...), x.ResultDigest)
	b = appendNullable(append(b, `,"verdict":`...), x.Verdict)
	return append(b, '}'), true
}

// jsonTimeOK reports whether encoding/json encodes t (a UTC time) as RFC 3339 without error.
func jsonTimeOK(t time.Time) bool {
	y := t.Year()
	return 0 <= y && y <= 9999
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes encoding/json writes as they are with HTML escaping on.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString quotes s as encoding/json does with HTML escaping on (json.Marshal's
// default): <, > and & as \u003c \u003e \u0026, U+2028 and U+2029 escaped, invalid UTF-8 as
// \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
