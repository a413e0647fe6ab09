package migration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
)

// A server restart in the middle of the copy: apply reconnects, resumes from its recorded
// progress and finishes with a correct table.
func TestServerRestartMidCopyResumesByItself(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	schema, sdb := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(30), KEY v (v)) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM "+sandboxtest.Seq(300000),
		"CREATE TABLE ref LIKE t", "INSERT INTO ref SELECT * FROM t")
	db := openControl(t, s)
	opts := testOptions(s, schema, "t")
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond} // many small copy chunks under the writers; verification at apply's chunk time
	opts.ProgressEvery, hooks.SaveEvery = 50*time.Millisecond, 50*time.Millisecond
	var logs logLines
	restarted := make(chan struct{})
	var once sync.Once
	opts.Progress = func(p Progress) {
		if p.Stage == state.StageCopy && p.RowsCopied > 30000 {
			once.Do(func() {
				go func() {
					if err := s.Restart(context.Background()); err != nil {
						t.Errorf("restart: %v", err)
					}
					close(restarted)
				}()
			})
		}
	}
	opts.Logger = logs.logger()
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	<-restarted
	if err != nil {
		t.Fatalf("apply did not survive the restart: %v", err)
	}
	joined := logs.String()
	if !strings.Contains(joined, "lost the connection") || !strings.Contains(joined, "resuming migration") {
		t.Fatalf("no reconnect and resume in the log:\n%s", joined)
	}
	if res.RowsCopied >= 300000 {
		t.Fatalf("the copy started over (%d rows)", res.RowsCopied)
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("not converted")
	}
	if diff := sameRows(t, db, schema, "t", "ref", []string{"id", "v"}, "id"); diff != "" {
		t.Fatal(diff)
	}
}
