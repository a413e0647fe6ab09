package migration

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// TestStressNothingLost is the seeded, reproducible proof that nothing is lost: many writers with
// owned key ranges run the 16:7:1 mix plus deletes and primary-key changes from before the copy
// until after a rollback, through copy (sometimes interrupted and resumed), verify, cut-over and
// rollback, and every acknowledged write is checked at the end, as is every read on the way.
//
// The default run uses one seed. ENGINEMIG_STRESS_SEEDS=N runs seeds 1..N (the long tier, see
// docs/testing/answers-security-stress.md); ENGINEMIG_STRESS_SEED=S runs only seed S, to reproduce a failure.
func TestStressNothingLost(t *testing.T) {
	seeds := []uint64{1}
	if s := os.Getenv("ENGINEMIG_STRESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ENGINEMIG_STRESS_SEED: %v", err)
		}
		seeds = []uint64{n}
	} else if s := os.Getenv("ENGINEMIG_STRESS_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ENGINEMIG_STRESS_SEEDS=%q: want a positive number", s)
		}
		seeds = nil
		for i := 1; i <= n; i++ {
			seeds = append(seeds, uint64(i))
		}
	}
	var passed int
	var writes, reads, rows int64
	for _, seed := range seeds {
		if t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			acked, rd, checked := stressOnce(t, seed)
			writes += acked
			reads += rd
			rows += int64(checked)
		}) {
			passed++
		}
	}
	t.Logf("stress: %d of %d runs passed (each: no lost write, no stale read, no application error); "+
		"%d acknowledged writes and %d reads checked, %d rows compared in the passed runs",
		passed, len(seeds), writes, reads, rows)
}

func stressOnce(t *testing.T, seed uint64) (acked, reads int64, checked int) {
	r := rand.New(rand.NewPCG(seed, 99))
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	db.SetMaxOpenConns(40)
	cfg := ackload.Config{Writers: 6 + r.IntN(7), RowsPerWriter: 1500 + r.IntN(1500), Seed: seed,
		Pause: time.Duration(r.IntN(400)) * time.Microsecond}
	l, err := ackload.Create(context.Background(), db, schema, "t", cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(srv, schema, "t")
	opts.Logger = nil
	opts.ChunkTime = []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond}[r.IntN(3)]
	opts.ClientSide = r.IntN(4) == 0
	hooks := faults.Hooks{}
	hooks.CopyStage = faults.Force(r.IntN(3)) // auto (while contended), always, never
	hooks.VerifyRelease = faults.Force(r.IntN(3))
	opts.ProgressEvery, hooks.SaveEvery = 20*time.Millisecond, 20*time.Millisecond
	crash := r.IntN(3) == 0
	if crash {
		hooks.CrashAfterRows = int64(1000 + r.IntN(cfg.Writers*cfg.RowsPerWriter/2))
	}
	if !opts.ClientSide && r.IntN(2) == 0 { // two chunks in flight throughout, some overtaken
		opts.CopyWorkers, hooks.CopyAlwaysParallel, hooks.OvertakeDelay = 2, true, time.Duration(r.IntN(3))*10*time.Millisecond
	}
	t.Logf("seed %d: %d writers x %d rows, pause %s, chunk %s, client-side %v, stage policy %d, verify release %d, crash after %d rows, copy workers %d (overtaken by %s)",
		seed, cfg.Writers, cfg.RowsPerWriter, cfg.Pause, opts.ChunkTime, opts.ClientSide, hooks.CopyStage, hooks.VerifyRelease, hooks.CrashAfterRows,
		max(opts.CopyWorkers, 1), hooks.OvertakeDelay)
	stop := l.Start()
	defer stop()
	time.Sleep(time.Duration(r.IntN(200)) * time.Millisecond)
	if crash {
		if _, err := Run(withHooks(context.Background(), hooks), db, opts); !errors.Is(err, errSimulatedCrash) {
			t.Fatalf("interrupted run: %v", err)
		}
		time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
		hooks.CrashAfterRows = 0
	}
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	if err != nil {
		t.Fatalf("migration: %v", err)
	}
	time.Sleep(time.Duration(100+r.IntN(300)) * time.Millisecond)
	if _, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t",
		StateSchema: opts.StateSchema}); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	time.Sleep(time.Duration(50+r.IntN(200)) * time.Millisecond)
	stop()
	st := l.Stats()
	if st.Errors > 0 || st.Stale > 0 {
		t.Errorf("application saw %d errors, %d stale reads: %s", st.Errors, st.Stale, strings.Join(l.Problems(5), "; "))
	}
	if engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("t is not MyISAM after the rollback")
	}
	checked, diffs, err := l.Check(context.Background(), db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("lost or wrong writes after migration and rollback (seed %d):\n%s", seed, strings.Join(diffs, "\n"))
	}
	// The InnoDB table kept by the rollback held the same rows at the moment of the swap back;
	// the live table is what counts, and it has been checked.
	t.Logf("seed %d: copied %d, replayed %d, %d writes and %d reads acknowledged, %d rows identical", seed, res.RowsCopied,
		res.CaptureChanges, st.Acked, st.Reads, checked)
	return st.Acked, st.Reads, checked
}
