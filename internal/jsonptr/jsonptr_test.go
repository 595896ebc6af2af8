package jsonptr

import (
	"errors"
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		pointer string
		want    []string // nil with ok false: refused
		ok      bool
	}{
		{"", nil, true},
		{"/", []string{""}, true},
		{"/a/b", []string{"a", "b"}, true},
		{"/a~1b", []string{"a/b"}, true},
		{"/m~0n", []string{"m~n"}, true},
		{"/~01", []string{"~1"}, true}, // "~1" is unescaped first, so this is not "/"
		{"/~10", []string{"/0"}, true},
		{"//", []string{"", ""}, true},
		{"a", nil, false},
		{"/~", nil, false},
		{"/a~", nil, false},
		{"/~2", nil, false},
		{"/a/~x/b", nil, false},
		{"/~~0", nil, false},
	}
	for _, tt := range tests {
		got, err := Split(tt.pointer)
		if !tt.ok {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Split(%q) = %q, %v; want ErrSyntax", tt.pointer, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tt.pointer, got, err, tt.want)
		}
	}
}
