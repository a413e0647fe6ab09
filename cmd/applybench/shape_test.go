package main

import (
	"strings"
	"testing"
)

// The game's request is what it was before the shapes: 16 SELECTs, 7 UPDATEs and 1 INSERT,
// interleaved, and a DELETE added to every 10th request.
func TestGameRequestIsTheWebMix(t *testing.T) {
	g := newGameShape()
	var want []string
	for i := 0; i < 16; i++ {
		want = append(want, "select")
		if i < 7 {
			want = append(want, "update")
		}
		if i < 1 {
			want = append(want, "insert")
		}
	}
	names := func(n int) string {
		var out []string
		for _, st := range g.request(n) {
			out = append(out, st.name)
		}
		return strings.Join(out, " ")
	}
	if got := names(0); got != strings.Join(want, " ") {
		t.Errorf("request 0: %s\nwant %s", got, strings.Join(want, " "))
	}
	if got := names(9); got != strings.Join(append(want, "delete"), " ") {
		t.Errorf("request 9: %s, want the mix and a DELETE", got)
	}
	if got := names(10); got != strings.Join(want, " ") {
		t.Errorf("request 10 after 9: %s (the DELETE must not stay)", got)
	}
}
