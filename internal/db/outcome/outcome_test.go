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

func TestFailedSafeNeverHidesNeedsAttention(t *testing.T) {
	inner := New(NeedsAttention, errors.New("a write was interrupted"), "skip the event on each replica")
	err := New(FailedSafe, fmt.Errorf("bring t up to date: %w", inner), "nothing was swapped")
	if CodeOf(err) != NeedsAttention {
		t.Fatalf("code %d, want %d", CodeOf(err), NeedsAttention)
	}
	if err.Error() != "bring t up to date: a write was interrupted; skip the event on each replica; nothing was swapped" {
		t.Fatalf("message %q", err.Error())
	}
	if CodeOf(New(FailedSafe, errors.New("plain"), "")) != FailedSafe {
		t.Fatal("a plain failure is failed safe")
	}
}
