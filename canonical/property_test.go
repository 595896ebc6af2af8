package canonical

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"
)

// Number layout agrees with jcs.NumberToJSON on every finite double.
func TestPropertyFloatMatchesJCS(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := math.Float64frombits(rapid.Uint64().Draw(t, "bits"))
		got, ok := appendFloat(nil, f)
		want, err := jcs.NumberToJSON(f)
		if ok != (err == nil) {
			t.Fatalf("%v: ok=%v, jcs err=%v", f, ok, err)
		}
		if ok && string(got) != want {
			t.Fatalf("%v: got %s, jcs %s", f, got, want)
		}
	})
}

// numberLiteral draws JSON number text of every shape the grammar allows.
func numberLiteral() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		var sb strings.Builder
		if rapid.Bool().Draw(t, "neg") {
			sb.WriteByte('-')
		}
		sb.WriteString(rapid.StringMatching(`0|[1-9][0-9]{0,24}`).Draw(t, "int"))
		if rapid.Bool().Draw(t, "frac") {
			sb.WriteString(rapid.StringMatching(`\.[0-9]{1,24}`).Draw(t, "fracDigits"))
		}
		if rapid.Bool().Draw(t, "exp") {
			sb.WriteString(rapid.StringMatching(`[eE][+-]?[0-9]{1,3}`).Draw(t, "expDigits"))
		}
		return sb.String()
	})
}

// The exactness check agrees with exact rational arithmetic, and an exact
// number canonicalizes as RFC 8785 (jcs) would.
func TestPropertyNumberExactness(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lit := numberLiteral().Draw(t, "lit")
		got, err := Transform([]byte(lit))
		f, perr := strconv.ParseFloat(lit, 64)
		litRat, ok := new(big.Rat).SetString(lit)
		if !ok {
			t.Fatalf("big.Rat cannot read %s", lit)
		}
		switch {
		case perr != nil:
			if !IsCode(err, CodeNumberRange) {
				t.Fatalf("%s: %v, want %s", lit, err, CodeNumberRange)
			}
		case f == 0 && litRat.Sign() != 0:
			if !IsCode(err, CodeNumberRange) {
				t.Fatalf("%s: %v, want %s (underflow)", lit, err, CodeNumberRange)
			}
		default:
			canonRat, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
			exact := canonRat.Cmp(litRat) == 0
			if exact != (err == nil) {
				t.Fatalf("%s: exact=%v, err=%v", lit, exact, err)
			}
			if err != nil && !IsCode(err, CodeNumberNotExact) {
				t.Fatalf("%s: %v, want %s", lit, err, CodeNumberNotExact)
			}
			ref, jerr := jcs.Transform([]byte(lit))
			if jerr != nil {
				t.Fatalf("jcs %s: %v", lit, jerr)
			}
			loose, lerr := Options{allowInexact: true}.Transform([]byte(lit))
			if lerr != nil || string(loose) != string(ref) {
				t.Fatalf("%s: inexact form %s (%v), jcs %s", lit, loose, lerr, ref)
			}
			if exact && string(got) != string(ref) {
				t.Fatalf("%s: got %s, jcs %s", lit, got, ref)
			}
		}
	})
}

// jsonValue draws Go values of the shapes decoded JSON takes, with keys and
// strings chosen to exercise UTF-16 ordering and escaping.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 6
		if depth <= 0 {
			kinds = 4
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "bool")
		case 2:
			return jsonString().Draw(t, "string")
		case 3:
			switch rapid.IntRange(0, 2).Draw(t, "numkind") {
			case 0:
				return rapid.Int64Range(-1<<53, 1<<53).Draw(t, "int")
			case 1:
				f := math.Float64frombits(rapid.Uint64().Draw(t, "bits"))
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return 0.5
				}
				return f
			default:
				return json.Number(strconv.FormatFloat(rapid.Float64().Draw(t, "f"), 'g', -1, 64))
			}
		case 4:
			return rapid.SliceOfN(jsonValue(depth-1), 0, 4).Draw(t, "array")
		default:
			return rapid.MapOfN(jsonString(), jsonValue(depth-1), 0, 5).Draw(t, "object")
		}
	})
}

func jsonString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[a-c]{0,3}`),
		rapid.StringOf(rapid.SampledFrom([]rune{'a', '"', '\\', '\n', 0x01, 0x7f, 0x80, 0xe9, 0x2028, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x10ffff, '<', '&'})),
		rapid.String(),
	)
}

// Digest of a Go value equals the digest of its encoding/json text, and
// canonical output is a fixed point.
func TestPropertyDigestMatchesMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jsonValue(3).Draw(t, "v")
		text, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		d, err := Digest(v)
		if err != nil {
			t.Fatalf("Digest: %v", err)
		}
		dj, err := DigestJSON(text)
		if err != nil {
			t.Fatalf("DigestJSON(%s): %v", text, err)
		}
		if d != dj {
			m, _ := Marshal(v)
			c, _ := Transform(text)
			t.Fatalf("Digest %s != DigestJSON %s\nMarshal:   %s\nTransform: %s", d, dj, m, c)
		}
		canon, _ := Transform(text)
		if ref, err := jcs.Transform(text); err != nil || string(ref) != string(canon) {
			t.Fatalf("jcs: %s (%v), ours %s", ref, err, canon)
		}
		again, err := Transform(canon)
		if err != nil || string(again) != string(canon) {
			t.Fatalf("not a fixed point: %s -> %s (%v)", canon, again, err)
		}
		dv, err := Decode(text)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if dd, _ := Digest(dv); dd != d {
			t.Fatalf("Digest(Decode(x)) = %s, want %s", dd, d)
		}
	})
}
