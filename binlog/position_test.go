package binlog

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A read of the position whose context ends while it runs returns (verification reads it under
// a patience deadline of a few milliseconds). Scanned into sql.RawBytes, the row stays locked
// until the next Next, and Rows.Err waits for good behind the close the ended context starts.
func TestCurrentPositionReturnsWhenItsContextEnds(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, s)
	db.SetMaxOpenConns(4)
	r := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(3 * time.Second)
	n := 0
	for ; time.Now().Before(deadline); n++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(400))*time.Microsecond)
		done := make(chan struct{})
		go func() {
			CurrentPosition(ctx, db)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d: CurrentPosition did not return after its context ended", n)
		}
		cancel()
	}
	t.Logf("%d reads", n)
}
