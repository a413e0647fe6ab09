package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/lockwait"
)

// gateQueueWait bounds how long the gate waits for the rename to reach it. Until the rename is
// ordered and every write set before it is applied here, the gate holds up nothing but the
// rename; a rename ordered behind a long transaction waits for it on every node anyway.
const gateQueueWait = 30 * time.Second

// attemptGaleraGate is one attempt of the swap back on a Galera node (a rollback). There the
// converted table From is InnoDB and written on every node: a LOCK TABLES of From on this node
// holds none of the other nodes' writers, and their write sets, applied here, would wait for it
// (Galera's brute-force abort waits for an explicit lock) while the rename waits for them. So
// nothing locks From. The cut is the rename itself, a DDL in total order: once it is ordered, no
// change to From can come before it, and once it runs here, every change ordered before it has
// been applied here and written to this node's binlog. What is left is to stop it there until
// the capture has replayed those changes into To:
//
//  1. A holds the gate (HANDLER OPEN: an explicit shared metadata lock on an empty table of its
//     own, which no write needs and a DDL in total order waits for instead of aborting A);
//  2. the target catches up and the Recorder notes the position;
//  3. B sends RENAME Gate TO Gone, From TO Aside, To TO From. RENAME asks for its metadata locks
//     in name order and the gate's comes first (table.GateSortsFirst), so the rename waits there
//     holding no lock of From or To, and only after it was let into total order on this node:
//     every write set ordered before it is committed and in the binlog, and no commit after it
//     can happen until it ends;
//  4. the target catches up again (the capture still writes To: the rename holds no lock of it);
//  5. A closes the gate, which is all A does after step 3, and the rename runs.
//
// While the rename waits at the gate (steps 4-5) every commit of this node waits behind it, so
// step 4 is bounded by CatchUp. Before step 3 a failure changes nothing and the attempt is
// retried. After it, the rename cannot be withdrawn (the other nodes have run it): if it does
// not reach the gate within gateQueueWait or step 4 fails, the gate opens anyway and the swap
// is reported with ErrRenamedLate, because changes committed in between may be missing from To.
// So is a rename whose answer was lost with its connection and which the tables show went
// through.
func attemptGaleraGate(ctx context.Context, db *sql.DB, sw Swap, target Target, cfg Config, rec Recorder) (time.Duration, string, error) {
	// No DDL in total order now: the rename would wait behind it (past gateQueueWait for a long
	// one). Replicated events waiting to be applied are no reason to wait: none can need the gate.
	if err := noDDL(ctx, db, "before the gate"); err != nil {
		return 0, "", err
	}
	// A DDL in total order, sent while enginemig holds nothing.
	if _, err := db.ExecContext(ctx, table.CreateGate(sw.Schema, sw.Gate, GateComment)); err != nil {
		return 0, "", fmt.Errorf("create the gate %s: %w", sw.Gate, err)
	}
	connA, err := db.Conn(ctx)
	if err != nil {
		return 0, "", err
	}
	defer connA.Close()
	defer connA.Raw(func(any) error { return driver.ErrBadConn }) // never back to the pool with a handler open
	var idA int64
	if err := connA.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&idA); err != nil {
		return 0, "", err
	}
	// Should enginemig lose the server without the server seeing the connection close, the server
	// drops A's idle session after this, and the rename, if it waits at the gate, goes on. A is
	// idle for two catch-ups and the rename's way to the gate at most.
	idleLimit := int((gateWait(ctx) + 2*cfg.CatchUp).Seconds()) + 2
	if _, err := connA.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", idleLimit)); err != nil {
		return 0, "", err
	}
	if _, err := connA.ExecContext(ctx, table.HoldGate(sw.Schema, sw.Gate)); err != nil {
		return 0, "", fmt.Errorf("hold the gate %s: %w", sw.Gate, err)
	}
	gateOpen := true
	release := func() {
		if gateOpen {
			if _, err := connA.ExecContext(context.WithoutCancel(ctx), table.ReleaseGate); err != nil {
				cfg.Logger.Warn("cut-over: closing the gate failed; closing the connection releases it", "error", err)
				connA.Raw(func(any) error { return driver.ErrBadConn })
				connA.Close()
			}
			gateOpen = false
		}
	}
	defer release()
	connC, err := db.Conn(ctx)
	if err != nil {
		return 0, "", err
	}
	defer connC.Close()
	catchUp := func() (string, error) {
		cctx, cancel := context.WithTimeout(ctx, cfg.CatchUp)
		defer cancel()
		return target.WaitFor(cctx, connC)
	}
	pos, err := catchUp()
	if err != nil {
		return 0, pos, fmt.Errorf("%s did not catch up within %s: %w", sw.To, cfg.CatchUp, err)
	}
	if rec != nil {
		if err := rec.RecordSwap(ctx, pos); err != nil {
			return 0, pos, fmt.Errorf("before the rename: %w", err)
		}
	}
	if err := noDDL(ctx, db, "before the rename"); err != nil {
		return 0, pos, err
	}
	if f := faultsOf(ctx).OnLocked(); f != nil {
		f()
	}
	return renameAtGate(ctx, db, sw, cfg, idA, pos, catchUp, release)
}

// gateWait is gateQueueWait, or a test's shorter wait (Faults.GateWait).
func gateWait(ctx context.Context) time.Duration {
	if d := faultsOf(ctx).GateWait(); d > 0 {
		return d
	}
	return gateQueueWait
}

// renameAtGate sends the rename (step 3), catches up once it waits at the gate (step 4) and
// opens the gate (step 5). idA is the gate's session.
func renameAtGate(ctx context.Context, db *sql.DB, sw Swap, cfg Config, idA int64, pos string, catchUp func() (string, error), release func()) (time.Duration, string, error) {
	connB, err := db.Conn(ctx)
	if err != nil {
		return 0, pos, err
	}
	defer connB.Close()
	var idB int64
	if err := connB.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&idB); err != nil {
		return 0, pos, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := connB.ExecContext(context.WithoutCancel(ctx), table.RenameTables(sw.Schema,
			[2]string{sw.Gate, sw.Gone}, [2]string{sw.From, sw.Aside}, [2]string{sw.To, sw.From}))
		done <- err
	}()
	sent := time.Now()
	atGate, ended, err := waitAtGate(ctx, db, idB, done, gateWait(ctx))
	if ended && err != nil { // refused before it was ordered (nothing renamed anywhere), or its answer lost
		return 0, pos, renameFailed(ctx, db, sw, idB, pos, err, fmt.Errorf("%w: the rename's answer was lost", ErrRenamedLate))
	}
	if ended {
		done <- nil
	}
	var late error
	switch {
	case ended:
		late = fmt.Errorf("%w: the rename went through while the gate was held (the gate did not hold it)", ErrRenamedLate)
	case atGate:
		if f := faultsOf(ctx).OnRenameQueued(); f != nil {
			f(idA)
		}
		if at, cerr := catchUp(); cerr != nil { // pos stays the last position To reached
			late = fmt.Errorf("%w: %s did not catch up within %s while the rename waited at the gate (%v)", ErrRenamedLate, sw.To, cfg.CatchUp, cerr)
		} else {
			pos = at
		}
	default:
		late = fmt.Errorf("%w: the rename did not reach the gate within %s", ErrRenamedLate, gateWait(ctx))
	}
	select {
	case err := <-done: // the gate let it through early (A's session killed?)
		done <- err
		const early = "the rename went through before the gate was opened (was the gate's session killed?)"
		switch {
		case err != nil || !atGate:
		case late != nil:
			late = fmt.Errorf("%w; %s", late, early)
		default:
			// The catch-up read the binlog after the rename was ordered, and To took every change
			// up to there while it still had its name: nothing is missing.
			cfg.Logger.Warn("cut-over: "+early+"; "+sw.To+" had caught up with every change before it", "position", pos)
		}
	default:
	}
	release()
	held := time.Since(sent)
	if err := <-done; err != nil {
		if late == nil {
			late = fmt.Errorf("%w: the rename's answer was lost", ErrRenamedLate)
		}
		return held, pos, renameFailed(ctx, db, sw, idB, pos, err, late)
	}
	if _, err := db.ExecContext(context.WithoutCancel(ctx), table.DropTableIfExists(sw.Schema, sw.Gone)); err != nil {
		cfg.Logger.Warn("swapped; dropping the gate failed", "table", sw.Gone, "error", err)
	}
	if late != nil {
		return held, pos, lateSwap(sw, pos, late)
	}
	return held, pos, nil
}

// lateSwap is the error of a swap whose rename went through without the gate's last catch-up:
// To, now From, may lack changes committed on the node before the rename; Aside has every one.
func lateSwap(sw Swap, pos string, late error) error {
	return &SwappedError{Err: fmt.Errorf("%w: %s (the table swapped in) may lack changes committed before the rename that came after %s; %s (the table swapped out) has every change up to the rename, %s every change since", late, sw.From, orStart(pos), sw.Aside, sw.From)}
}

func orStart(pos string) string {
	if pos == "" {
		return "the last catch-up"
	}
	return pos
}

// renameFailed is the error of a rename that returned err: a late swap when it went through all
// the same (renamedAnyway), else the rename's own error.
func renameFailed(ctx context.Context, db *sql.DB, sw Swap, idB int64, pos string, err, late error) error {
	if renamedAnyway(ctx, db, sw.Schema, sw.Aside, idB, err) {
		return lateSwap(sw, pos, fmt.Errorf("%w (%v)", late, err))
	}
	return fmt.Errorf("rename: %w", err)
}

// waitAtGate polls until connection id (the rename) waits for a metadata lock: the gate's, asked
// for only once the rename runs in total order here. atGate is false when limit passes first;
// ended says the rename ended before (err is its error).
func waitAtGate(ctx context.Context, db *sql.DB, id int64, done <-chan error, limit time.Duration) (atGate, ended bool, err error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return false, true, err
		default:
		}
		if s, err := lockwait.Sessions(ctx, db, []int64{id}); err == nil && len(s) == 1 && strings.Contains(strings.ToLower(s[0].State), "metadata lock") {
			return true, false, nil
		}
		time.Sleep(2 * time.Millisecond) // as waitUntilBlocked polls: a process-list read each time
	}
	return false, false, nil
}

// GateComment marks a gate table so cleanup only ever drops a table enginemig made.
const GateComment = "enginemig swap-back gate"

// dropGates removes the gate after the last attempt (a DDL in total order, with nothing held).
func dropGates(ctx context.Context, db *sql.DB, sw Swap, log *slog.Logger) {
	for _, n := range []string{sw.Gate, sw.Gone} {
		if _, err := db.ExecContext(ctx, table.DropTableIfExists(sw.Schema, n)); err != nil {
			log.Warn("could not drop the swap-back gate; `enginemig cleanup` drops it", "table", n, "error", err)
		}
	}
}

// DropLeftGates drops the gates of table name that a swap back on a Galera node left when it
// died (recognised by GateComment), and returns their names.
func DropLeftGates(ctx context.Context, db *sql.DB, schema string, names ...string) ([]string, error) {
	var dropped []string
	for _, n := range names {
		var comment string
		err := db.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, n).Scan(&comment)
		if err != nil || comment != GateComment {
			continue
		}
		if _, err := db.ExecContext(ctx, table.DropTable(schema, n)); err != nil {
			return dropped, fmt.Errorf("drop %s: %w", n, err)
		}
		dropped = append(dropped, n)
	}
	return dropped, nil
}
