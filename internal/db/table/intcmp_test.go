package table

import (
	"math"
	"testing"
)

func TestCompareInts(t *testing.T) {
	cases := []struct {
		a, b any
		want int
	}{
		{int32(5), int64(5), 0},
		{int8(-1), uint64(0), -1},
		{uint64(math.MaxUint64), int64(math.MaxInt64), 1},
		{int64(math.MinInt64), int64(math.MinInt64 + 1), -1},
		{[]byte("18446744073709551615"), uint64(math.MaxUint64), 0},
		{"-3", int16(-4), 1},
		{uint32(7), int32(-7), 1},
	}
	for _, c := range cases {
		got, ok := CompareInts(c.a, c.b)
		if !ok || got != c.want {
			t.Errorf("CompareInts(%v, %v) = %d %v, want %d", c.a, c.b, got, ok, c.want)
		}
	}
	if _, ok := CompareInts("abc", 1); ok {
		t.Error("non-integer accepted")
	}
}
