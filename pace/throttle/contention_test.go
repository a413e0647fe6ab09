package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Contended reports a MyISAM lock wait that happened since the previous call, and nothing when
// there was none: copy and verify size their chunks by it.
func TestLockWaitsSeesMyISAMLockWaits(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM seq_1_to_100")
	ctx := context.Background()
	lw := NewContention(db)
	if !lw.Contended(ctx) {
		t.Fatal("the first call has no baseline and must report contention (stay gentle)")
	}
	if lw.Contended(ctx) {
		t.Fatal("contention reported while nobody waited")
	}
	// A scan holds MyISAM's read lock for about a second; an UPDATE queued behind it waits.
	done := make(chan struct{})
	go func() { db.Exec("SELECT COUNT(*) FROM t WHERE SLEEP(0.01) = 0"); close(done) }()
	time.Sleep(200 * time.Millisecond)
	if _, err := db.Exec("UPDATE t SET v = v + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	<-done
	if !lw.Contended(ctx) {
		t.Fatal("a writer waited for the table lock, but no contention was reported")
	}
	if lw.Contended(ctx) {
		t.Fatal("contention reported twice for one wait")
	}
}
