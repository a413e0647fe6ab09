package table

import (
	"reflect"
	"testing"
)

func TestAfterPredicate(t *testing.T) {
	if got := AfterPredicate([]string{"`a`"}); got != "((`a` > ?))" {
		t.Fatal(got)
	}
	want := "((`a` > ?) OR (`a` = ? AND `b` > ?))"
	if got := AfterPredicate([]string{"`a`", "`b`"}); got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	if got := AfterArgs([]any{1, "x"}); !reflect.DeepEqual(got, []any{1, 1, "x"}) {
		t.Fatal(got)
	}
}
