package migration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/internal/testkit/trxapp"
	"github.com/enginemig/enginemig/migration/rollback"
)

// The cut-over never makes an application statement fail, and no committed write is lost: the
// transactions of package trxapp (holding t across statements, then asking for more of t or for
// a named lock) run through apply and rollback (writers stopped and checked in between), and
// none may fail; at the end t counts exactly the committed transactions' updates. With a trigger
// of t's own, the carry's CREATE and DROP TRIGGER on the live table, after each swap, are held to
// the same rule.
func TestCutoverNeverFailsAnOpenTransaction(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		t.Skip("MySQL has no LOCK TABLES ... NOWAIT: its swaps still queue behind such transactions (docs/runbook/special-cases.md, \"Open transactions and the cut-over\")")
	}
	for _, c := range []struct{ name, capture string }{{"binlog", "binlog"}, {"triggers", "triggers"}, {"a trigger of its own", "binlog"}} {
		capture, ownTrigger := c.capture, c.name == "a trigger of its own"
		t.Run(c.name, func(t *testing.T) {
			opts := sandbox.Options{}
			if capture == "triggers" {
				opts.BinlogFormat = "OFF" // where apply's default capture is triggers
			}
			s := sandboxtest.ForTest(t, opts)
			const rows = 10000 // a copy of some seconds under the clients (20,000 until 2026-12-07: CI's time)
			schema, sdb := sandboxtest.FreshDatabase(t, s)
			sandboxtest.MustExec(t, sdb, trxapp.Schema("MyISAM", sandboxtest.Seq(rows))...)
			if ownTrigger {
				sandboxtest.MustExec(t, sdb, "CREATE TRIGGER t_bu BEFORE UPDATE ON t FOR EACH ROW SET NEW.pad = UPPER(NEW.pad)")
			}
			db := openControl(t, s)
			appDB, err := s.Open(schema)
			if err != nil {
				t.Fatal(err)
			}
			defer appDB.Close()
			// Trigger capture's verification chunks and the trigger carry lock t only in a moment no
			// transaction holds it: 8 clients back to back left none for minutes on a loaded machine
			// (the rollback's carry 3m54s, trigger capture's verification 3m54s, in CI); 4 still
			// keep transactions open through every swap. Binlog capture's chunks need no such gap.
			clients := 8
			if ownTrigger || capture == "triggers" {
				clients = 4
			}
			var app trxapp.App
			ctx, stop := context.WithCancel(context.Background())
			wg := app.Run(ctx, appDB, rows, clients)
			defer func() { stop(); wg.Wait() }()
			time.Sleep(300 * time.Millisecond)
			opts2 := testOptions(s, schema, "t")
			res, err := Run(context.Background(), db, opts2)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			committedAtSwap := app.Committed.Load()
			time.Sleep(300 * time.Millisecond)
			stop()
			wg.Wait()
			var sum0, n0 int64
			db.QueryRow("SELECT COALESCE(SUM(v), 0) FROM `" + schema + "`.t").Scan(&sum0)
			db.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.o").Scan(&n0)
			t.Logf("after apply (writers stopped): t counts %d updates, o holds %d rows, %d committed; %d errors", sum0, n0, app.Updates.Load(), len(app.Errors()))
			ctx, stop = context.WithCancel(context.Background())
			wg = app.Run(ctx, appDB, rows, clients)
			time.Sleep(300 * time.Millisecond)
			t.Logf("rollback starts at %s", time.Now().Format("15:04:05.000000"))
			rres, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts2.Conn, Schema: schema, Table: "t",
				StateSchema: opts2.StateSchema, Logger: opts2.Logger})
			t.Logf("rollback ends at %s", time.Now().Format("15:04:05.000000"))
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			time.Sleep(300 * time.Millisecond)
			stop()
			wg.Wait()
			t.Logf("apply's cut-over %d attempt(s), lock held %s; rollback's %d attempt(s), lock held %s; %d transactions committed (%d by apply's end)",
				res.Cutover.Attempts, res.Cutover.LockHeld.Round(time.Millisecond), rres.Cutover.Attempts, rres.Cutover.LockHeld.Round(time.Millisecond),
				app.Committed.Load(), committedAtSwap)
			if errs := app.Errors(); len(errs) > 0 {
				t.Errorf("%d application statement(s) failed, the first: %s", len(errs), strings.Join(errs[:min(3, len(errs))], "; "))
			}
			if ownTrigger {
				if trs, err := table.LoadTriggers(context.Background(), db, schema, "t"); err != nil || len(trs) != 1 || trs[0].Name != "t_bu" {
					t.Errorf("t's triggers after the rollback: %+v (%v), want t_bu", trs, err)
				}
			}
			var sum, n int64
			db.QueryRow("SELECT COALESCE(SUM(v), 0) FROM `" + schema + "`.t").Scan(&sum)
			db.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.o").Scan(&n)
			rows2, _ := db.Query("SELECT o.tid, COUNT(*), MIN(t.v), DATE_FORMAT(MIN(o.at), '%T.%f'), DATE_FORMAT(MAX(o.at), '%T.%f'), GROUP_CONCAT(DATE_FORMAT(o.at, '%T.%f') ORDER BY o.at) FROM `" + schema + "`.o JOIN `" + schema + "`.t ON t.id = o.tid GROUP BY o.tid HAVING COUNT(*) <> MIN(t.v) LIMIT 8")
			for rows2 != nil && rows2.Next() {
				var id, c, v int64
				var lo, hi, all string
				rows2.Scan(&id, &c, &v, &lo, &hi, &all)
				t.Logf("id %d: %d committed updates, t says %d: %s", id, c, v, all)
			}
			if sum != n || n != app.Updates.Load() {
				t.Errorf("t counts %d updates and o holds %d rows, for %d updates committed", sum, n, app.Updates.Load())
			}
		})
	}
}
