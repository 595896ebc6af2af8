package convstate

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// goldenRecords are the decision records of the golden corpus, as the decision store keeps them.
func goldenRecords(tb testing.TB) [][]byte {
	f, err := os.Open("../verdictd/testdata/records/decisions.golden")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var out [][]byte
	for sc.Scan() {
		if l := sc.Bytes(); bytes.HasPrefix(l, []byte("{")) {
			out = append(out, bytes.Clone(l))
		}
	}
	if err := sc.Err(); err != nil || len(out) < 10 {
		tb.Fatalf("%d records read: %v", len(out), err)
	}
	return out
}

// storedAllowRecord is the largest record of the golden corpus that issued a verdict, its
// verdict a token whose payload names an audience.
func storedAllowRecord(tb testing.TB) []byte {
	best := ""
	for _, r := range goldenRecords(tb) {
		if l := string(r); strings.Contains(l, `"verdict":"<jws`) && len(l) > len(best) {
			best = l
		}
	}
	if best == "" {
		tb.Fatal("no record with a verdict in the golden corpus")
	}
	b64 := base64.RawURLEncoding
	tok := b64.EncodeToString([]byte(`{"alg":"EdDSA","kid":"k","typ":"verdict+jwt"}`)) + "." +
		b64.EncodeToString([]byte(`{"iss":"verdictd","aud":["executor-bank","executor-2"],"jti":"vrd_1","exp":2,"iat":1,"nbf":1}`)) +
		"." + strings.Repeat("A", 86)
	i := strings.Index(best, `"verdict":"<jws`)
	j := strings.Index(best[i+11:], `"`) + i + 11
	return []byte(best[:i] + `"verdict":"` + tok + best[j:])
}

func BenchmarkVerdictOf(b *testing.B) {
	rec := storedAllowRecord(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		v, err := VerdictOf("rec_1", rec)
		if err != nil || len(v.Audience) != 2 {
			b.Fatal(v, err)
		}
	}
}

// TestVerdictOfReadsAsEncodingJSON holds VerdictOf to what encoding/json read of the same
// stored records (every record of the golden corpus, and one with a verdict), call arguments
// byte for byte.
func TestVerdictOfReadsAsEncodingJSON(t *testing.T) {
	records := append([][]byte{storedAllowRecord(t)}, goldenRecords(t)...)
	for i, stored := range records {
		got, err := VerdictOf("rec", stored)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		var want struct {
			storedVerdictRecord
		}
		if err := json.NewDecoder(bytes.NewReader(stored)).Decode(&want.storedVerdictRecord); err != nil {
			t.Fatalf("record %d: encoding/json: %v", i, err)
		}
		w := &Verdict{RecordID: "rec", ActionKey: want.ActionKey, ArgumentsDigest: want.ArgumentsDigest, CallArguments: want.CallArguments}
		if want.Verdict != nil {
			parts := strings.Split(*want.Verdict, ".")
			if len(parts) == 3 {
				var c struct {
					Aud []string `json:"aud"`
				}
				if p, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil && json.Unmarshal(p, &c) == nil {
					w.Audience = c.Aud
				}
			}
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("record %d: VerdictOf read %+v, encoding/json %+v", i, got, w)
		}
	}
}
