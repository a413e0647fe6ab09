package outcome

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodeOfFollowsWrapping(t *testing.T) {
	base := errors.New("table t is already InnoDB")
	err := fmt.Errorf("preflight: %w", New(Refused, base, "nothing to do"))
	if got := CodeOf(err); got != Refused {
		t.Fatalf("CodeOf = %d, want %d", got, Refused)
	}
	if !errors.Is(err, base) {
		t.Fatal("wrapped error lost")
	}
	if CodeOf(nil) != OK || CodeOf(base) != Internal {
		t.Fatal("nil must be OK and unclassified Internal")
	}
	if err.Error() != "preflight: table t is already InnoDB; nothing to do" {
		t.Fatalf("message %q", err.Error())
	}
}
