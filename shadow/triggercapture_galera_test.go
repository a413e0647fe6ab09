package shadow

import (
	"context"
	"errors"
	"testing"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/table"
)

// On a Galera node a sync's writes may outlive its wait (pending). A periodic sync used to wait
// for them before it took its lock, so a sync that had the lock meanwhile (verification's, which
// no Hold keeps off) could leave writes pending that the periodic one then wrote beside: its newer
// rows could land first, the older ones after, with their notes forgotten (a verification
// mismatch in CI's TestGalera). The sync now waits for pending writes under its own lock, and
// writes nothing while they pend. Run on a plain server with the Galera sync's sessions; a row
// lock on the target keeps the first sync's writes waiting.
func TestGaleraSyncNeverWritesBesidePendingWrites(t *testing.T) {
	ctx := context.Background()
	p, schema, _ := open(t, 100, func(cfg *Config) {
		cfg.Mode, cfg.ChangeLog, cfg.Galera = Triggers, table.ChangeLogName("t", false), true
	})
	if err := p.Copy(ctx, nil, nil, copier.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	tc := p.capture.(*triggerCapture)
	tc.Hold() // the test runs the syncs itself
	defer tc.Release()
	db := p.cfg.DB
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	blocker, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	for _, q := range []string{"BEGIN", "SELECT v FROM `" + schema + "`.tgt WHERE id = 1 FOR UPDATE"} {
		if _, err := blocker.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	writing := func() int {
		var n int
		db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INSTR(INFO, '`tgt`') > 0 AND INFO NOT LIKE '%PROCESSLIST%'").Scan(&n)
		return n
	}
	exec("UPDATE `" + schema + "`.t SET v = 'first' WHERE id = 1")
	if _, err := tc.syncUnder(ctx, tc.c.LockSource(), tc.syncRead); !errors.Is(err, errWritesPending) {
		t.Fatalf("the first sync, its writes kept waiting: %v, want its writes pending", err)
	}
	exec("UPDATE `" + schema + "`.t SET v = 'second' WHERE id = 1")
	// A sync that passed any wait before its lock (as a periodic one did) while the first held it.
	if _, err := tc.syncUnder(ctx, tc.c.LockSource(), tc.syncRead); !errors.Is(err, errWritesPending) {
		t.Fatalf("the second sync, the first's writes pending: %v, want it to wait for them and give up", err)
	}
	if n := writing(); n != 1 {
		t.Fatalf("%d writes of the target in flight, want the first sync's only: the second wrote beside the first's pending writes", n)
	}
	if _, err := blocker.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := db.QueryRowContext(ctx, "SELECT v FROM `"+schema+"`.tgt WHERE id = 1").Scan(&v); err != nil || v != "second" {
		t.Fatalf("target row 1 after the syncs: %q (%v), want %q", v, err, "second")
	}
}
