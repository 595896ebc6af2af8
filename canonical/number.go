package canonical

import (
	"bytes"
	"math"
	"strconv"
)

// numberLit is a JSON number token split along the RFC 8259 grammar.
type numberLit struct {
	neg      bool
	intPart  []byte // digits before the point, never empty
	fracPart []byte // digits after the point, possibly empty
	exp      int64  // the exponent as written, saturated far outside double range
	hasExp   bool
}

// expSaturation bounds a written exponent. Any literal whose exponent is
// saturated is outside double range unless its digits compensate, which would
// need more digits than any input can hold.
const expSaturation = 1 << 40

// scanNumber checks b[pos:] against the RFC 8259 number grammar and returns
// the token's parts and the offset just past it. It does not look at the byte
// after the token: the caller's grammar decides whether that may follow.
func scanNumber(b []byte, pos int) (numberLit, int, *Error) {
	var n numberLit
	start := pos
	if pos < len(b) && b[pos] == '-' {
		n.neg = true
		pos++
	}
	if pos >= len(b) || !isDigit(b[pos]) {
		return n, pos, newError(CodeInvalidJSON, start, "invalid number: expected a digit")
	}
	intStart := pos
	if b[pos] == '0' {
		pos++
	} else {
		for pos < len(b) && isDigit(b[pos]) {
			pos++
		}
	}
	n.intPart = b[intStart:pos]
	if pos < len(b) && b[pos] == '.' {
		pos++
		fracStart := pos
		for pos < len(b) && isDigit(b[pos]) {
			pos++
		}
		if pos == fracStart {
			return n, pos, newError(CodeInvalidJSON, start, "invalid number: expected a digit after the decimal point")
		}
		n.fracPart = b[fracStart:pos]
	}
	if pos < len(b) && (b[pos] == 'e' || b[pos] == 'E') {
		n.hasExp = true
		pos++
		expNeg := false
		if pos < len(b) && (b[pos] == '+' || b[pos] == '-') {
			expNeg = b[pos] == '-'
			pos++
		}
		expStart := pos
		for pos < len(b) && isDigit(b[pos]) {
			if n.exp < expSaturation {
				n.exp = n.exp*10 + int64(b[pos]-'0')
			}
			pos++
		}
		if pos == expStart {
			return n, pos, newError(CodeInvalidJSON, start, "invalid number: expected a digit in the exponent")
		}
		if expNeg {
			n.exp = -n.exp
		}
	}
	return n, pos, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// appendNumber appends the RFC 8785 form of the number token lit (already
// split into n) to dst. Unless inexact is allowed, it refuses a token whose
// canonical form denotes a different decimal value than the token itself.
// off is the token's offset, for errors.
func appendNumber(dst []byte, lit []byte, n numberLit, off int, allowInexact bool) ([]byte, *Error) {
	// Integers of at most 15 digits are below 2^53, so a double holds them
	// exactly and ECMAScript prints them digit for digit: the token is its
	// own canonical form. This is the common case for tool arguments.
	if len(n.fracPart) == 0 && !n.hasExp && len(n.intPart) <= 15 {
		if n.intPart[0] == '0' {
			return append(dst, '0'), nil // "0" and "-0"
		}
		return append(dst, lit...), nil
	}

	hi, lo, e := n.significand()
	k := len(hi) + len(lo)
	if k == 0 {
		return append(dst, '0'), nil // zero, however written
	}
	// A decimal of at most 15 significant digits (DBL_DIG) in the normal
	// range survives the trip through a double, and no other decimal of at
	// most 15 digits rounds to the same double, so it is its own shortest
	// round-trip form: exact, with the digits as written.
	if exp10 := e + int64(k) - 1; k <= 15 && -300 <= exp10 && exp10 <= 300 {
		var buf [15]byte
		digits := append(append(buf[:0], hi...), lo...)
		if n.neg {
			dst = append(dst, '-')
		}
		return appendES(dst, digits, int(exp10)), nil
	}

	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// The grammar was checked, so only a range error can reach here.
		return dst, newError(CodeNumberRange, off, "number is outside the range of an IEEE-754 double")
	}
	if f == 0 {
		if !allZero(n.intPart) || !allZero(n.fracPart) {
			return dst, newError(CodeNumberRange, off, "number is too small for an IEEE-754 double and would become zero")
		}
		return append(dst, '0'), nil
	}

	var scratch [32]byte
	// The shortest digits that round-trip, as "d.ddde±xx": the same digits
	// ECMAScript's Number::toString chooses.
	short := strconv.AppendFloat(scratch[:0], math.Abs(f), 'e', -1, 64)
	digits, exp10 := splitShortest(short)

	if !allowInexact && !sameDecimal(n, digits, exp10) {
		return dst, newError(CodeNumberNotExact, off, "number cannot be represented exactly as an IEEE-754 double; send it as a string")
	}
	if f < 0 {
		dst = append(dst, '-')
	}
	return appendES(dst, digits, exp10), nil
}

// appendFloat appends the RFC 8785 form of f.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	if f == 0 {
		return append(dst, '0'), true
	}
	var scratch [32]byte
	short := strconv.AppendFloat(scratch[:0], math.Abs(f), 'e', -1, 64)
	digits, exp10 := splitShortest(short)
	if f < 0 {
		dst = append(dst, '-')
	}
	return appendES(dst, digits, exp10), true
}

// splitShortest turns strconv's "d.ddde±xx" into significant digits (written
// into the same buffer, point removed) and the decimal exponent of the first
// digit.
func splitShortest(s []byte) ([]byte, int) {
	e := bytes.LastIndexByte(s, 'e')
	exp := 0
	for _, c := range s[e+2:] {
		exp = exp*10 + int(c-'0')
	}
	if s[e+1] == '-' {
		exp = -exp
	}
	digits := s[:e]
	if len(digits) > 1 { // drop the '.'
		copy(digits[1:], digits[2:])
		digits = digits[:len(digits)-1]
	}
	return digits, exp
}

// appendES lays out digits d1…dk with value 0.d1…dk × 10^(exp10+1) the way
// ECMAScript's Number::toString does (ECMA-262 §6.1.6.1.20).
func appendES(dst, digits []byte, exp10 int) []byte {
	k := len(digits)
	n := exp10 + 1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for i := k; i < n; i++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for i := n; i < 0; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// significand returns the literal's significant digits, without leading or
// trailing zeros, as hi ‖ lo (the literal's point may fall between them),
// and e such that the literal's value is ±(hi ‖ lo) × 10^e.
func (n numberLit) significand() (hi, lo []byte, e int64) {
	hi, lo = n.intPart, n.fracPart
	e = n.exp - int64(len(lo))
	for len(lo) > 0 && lo[len(lo)-1] == '0' {
		lo = lo[:len(lo)-1]
		e++
	}
	if len(lo) == 0 {
		for len(hi) > 0 && hi[len(hi)-1] == '0' {
			hi = hi[:len(hi)-1]
			e++
		}
	}
	for len(hi) > 0 && hi[0] == '0' {
		hi = hi[1:]
	}
	if len(hi) == 0 {
		for len(lo) > 0 && lo[0] == '0' {
			lo = lo[1:]
		}
	}
	return hi, lo, e
}

// sameDecimal reports whether the literal n denotes exactly the decimal
// digits × 10^(exp10-len(digits)+1). Both sides are brought to the form
// "significant digits without leading or trailing zeros" × 10^e and
// compared; this is exact, and unlike math/big it costs nothing for a
// literal such as 1e300.
func sameDecimal(n numberLit, digits []byte, exp10 int) bool {
	hi, lo, e := n.significand()
	if len(hi)+len(lo) != len(digits) || e != int64(exp10-len(digits)+1) {
		return false
	}
	return string(hi) == string(digits[:len(hi)]) && string(lo) == string(digits[len(hi):])
}

func allZero(b []byte) bool { return len(bytes.TrimLeft(b, "0")) == 0 }
