package bench

import (
	"math/rand/v2"
	"testing"
)

// The production mix is 16:7:1 per 24 operations, in that order, and the benchmark's default.
func TestWebMixIs16To7To1(t *testing.T) {
	m := WebMix()
	if m.String() != "16:7:1" || m.Total() != 24 {
		t.Fatalf("WebMix = %s (total %d), want 16:7:1 (24)", m, m.Total())
	}
	var got []Op
	for n := 0; n < m.Total(); n++ {
		got = append(got, m.Op(n))
	}
	for n, op := range got {
		want := OpSelect
		if n >= 16 {
			want = OpUpdate
		}
		if n >= 23 {
			want = OpInsert
		}
		if op != want {
			t.Fatalf("Op(%d) = %s, want %s", n, op, want)
		}
	}
	if d := DefaultMix(); d.String() != m.String() || d.Source != "default" {
		t.Fatalf("DefaultMix = %s from %q, want WebMix from \"default\"", d, d.Source)
	}
}

// Zero weights take no values, and deletes come last.
func TestMixOpSkipsZeroWeights(t *testing.T) {
	m := Mix{Update: 2, Delete: 1}
	for n, want := range []Op{OpUpdate, OpUpdate, OpDelete} {
		if got := m.Op(n); got != want {
			t.Fatalf("Op(%d) = %s, want %s", n, got, want)
		}
	}
}

// Draw keeps the proportions and, seeded alike, repeats itself.
func TestMixDrawProportions(t *testing.T) {
	m := WebMix()
	a, b := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	counts := map[Op]int{}
	const draws = 240000
	for i := 0; i < draws; i++ {
		op := m.Draw(a)
		if op != m.Draw(b) {
			t.Fatal("two equally seeded draws differ")
		}
		counts[op]++
	}
	for op, weight := range map[Op]int{OpSelect: 16, OpUpdate: 7, OpInsert: 1} {
		want := draws * weight / 24
		if d := counts[op] - want; d < -want/20 || d > want/20 {
			t.Errorf("%s drawn %d times, want about %d", op, counts[op], want)
		}
	}
}
