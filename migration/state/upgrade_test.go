package state_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/shadow"
)

// A state table written by an earlier version (no triggers column) is read as it is, and
// upgraded only by Ensure, which apply runs after its refusals.
func TestStateTableOfAnEarlierVersion(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, srv)
	schema := "_state_old_version"
	sandboxtest.MustExec(t, db, "CREATE DATABASE "+schema)
	t.Cleanup(func() { db.Exec("DROP DATABASE " + schema) })
	s := state.NewStore(db, schema)
	if err := s.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, db, "ALTER TABLE "+s.Name()+" DROP COLUMN triggers, DROP COLUMN capture")
	st := state.State{Schema: "d", Table: "t", Stage: state.StageCopy}
	if _, err := db.Exec("INSERT INTO " + s.Name() + " (schema_name, table_name, stage, started_at, updated_at) VALUES ('d', 't', 'copy', NOW(), NOW())"); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(context.Background(), "d", "t")
	if err != nil || len(got) != 1 || got[0].Stage != st.Stage || got[0].CaptureMode() != shadow.Binlog {
		t.Fatalf("reading an earlier version's table: %v %+v", err, got)
	}
	if err := s.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	has, err := s.Columns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"triggers", "capture"} {
		if !has[col] {
			t.Fatalf("Ensure did not add the %s column", col)
		}
	}
}

// A second Lock on the same table is refused, naming the holder; one whose holder lets go a moment
// later is granted: the server releases a dead or closed connection's lock a moment after it goes
// (under load, long enough that an apply run again at once after a crashed one was refused by its
// predecessor).
func TestLockRefusesASecondApplyButNotAFinishedOne(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	cfg := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	ctx := context.Background()
	first, err := state.Lock(ctx, cfg, "d", "t")
	if err != nil {
		t.Fatal(err)
	}
	if second, err := state.Lock(ctx, cfg, "d", "t"); err == nil || outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "another enginemig is migrating") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second lock while the first is held: %v (exit %d), want refused naming the other enginemig", err, outcome.CodeOf(err))
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		first.Close()
	}()
	next, err := state.Lock(ctx, cfg, "d", "t")
	if err != nil {
		t.Fatalf("a lock whose holder let go 300 ms later: %v", err)
	}
	next.Close()
}
