// Package verify compares a source table and its shadow chunk by chunk at consistent points
// (MyISAM has no snapshots, so each source chunk is briefly read-locked while replay catches up),
// and recopies chunks that differ.
package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/table"
	"github.com/enginemig/enginemig/throttle"
)

// Replay is what verification needs from the replayer.
type Replay interface {
	WaitFor(ctx context.Context, p binlog.Position) error
}

// Config tunes verification.
type Config struct {
	// ChunkTime is the target time one chunk keeps the source read-locked.
	ChunkTime time.Duration
	// IdleChunkTime is the target while no client waits for the table (see copier).
	IdleChunkTime time.Duration
	// RestRatio: pause after a chunk other clients waited for, this multiple of its lock time.
	RestRatio float64
	// CatchUp bounds the wait for replay while the lock is held.
	CatchUp time.Duration
	Log     func(format string, args ...any)
}

// Result counts what verification saw.
type Result struct {
	Chunks   int           `json:"chunks"`
	Rows     int64         `json:"rows"`
	Repaired int           `json:"repaired_chunks"`
	LockTime time.Duration `json:"lock_ns"`
	Duration time.Duration `json:"duration_ns"`
}

// ErrMismatch means a chunk still differed after being recopied.
var ErrMismatch = errors.New("source and shadow differ")

type verifier struct {
	db      *sql.DB
	src     string
	dst     string
	keyCols []string
	intKey  []bool
	sum     string
	bound   [2]string // first chunk, following chunks
	recopy  string    // REPLACE ... SELECT for a range (fmt verb: the range predicate)
	orphans string    // DELETE of shadow rows missing from the source (fmt verb: the range predicate)
	replay  Replay
	cfg     Config
	waits   *throttle.LockWaits
}

// Run verifies ti against its shadow named shadow. db is a control pool (it needs 3 connections).
func Run(ctx context.Context, db *sql.DB, ti *table.Info, shadow string, replay Replay, cfg Config) (Result, error) {
	if cfg.ChunkTime <= 0 {
		cfg.ChunkTime = 20 * time.Millisecond
	}
	if cfg.CatchUp <= 0 {
		cfg.CatchUp = time.Second
	}
	if cfg.IdleChunkTime == 0 {
		cfg.IdleChunkTime = 250 * time.Millisecond
	}
	if cfg.RestRatio == 0 {
		cfg.RestRatio = 1
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	key, ok := ti.CopyKey()
	if !ok {
		return Result{}, fmt.Errorf("%s has no usable key", ti.QuotedName())
	}
	v := &verifier{db: db, src: ti.QuotedName(), dst: dbconn.QualifiedName(ti.Schema, shadow), replay: replay, cfg: cfg,
		waits: throttle.NewLockWaits(db)}
	var cols, nulls, quotedKey []string
	for _, c := range ti.CopyColumns() {
		q := dbconn.QuoteIdent(c.Name)
		cols = append(cols, "CAST("+q+" AS BINARY)")
		nulls = append(nulls, "ISNULL("+q+")")
	}
	for _, k := range key.ColumnNames() {
		quotedKey = append(quotedKey, dbconn.QuoteIdent(k))
		v.keyCols = append(v.keyCols, k)
		col, _ := ti.Column(k)
		switch strings.ToLower(col.DataType) {
		case "tinyint", "smallint", "mediumint", "int", "bigint":
			v.intKey = append(v.intKey, true)
		default:
			v.intKey = append(v.intKey, false)
		}
	}
	// CONCAT_WS skips NULLs, so the NULL flags keep NULL and '' apart.
	v.sum = "SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS('#', CONCAT(" + strings.Join(nulls, ",") + "), " + strings.Join(cols, ",") + "))), 0) FROM %s WHERE %s"
	keyList := strings.Join(quotedKey, ",")
	after := table.AfterPredicate(quotedKey)
	v.bound[0] = "SELECT " + keyList + " FROM " + v.src + " ORDER BY " + keyList + " LIMIT 1 OFFSET ?"
	v.bound[1] = "SELECT " + keyList + " FROM " + v.src + " WHERE " + after + " ORDER BY " + keyList + " LIMIT 1 OFFSET ?"
	names := make([]string, 0, len(ti.CopyColumns()))
	for _, c := range ti.CopyColumns() {
		names = append(names, dbconn.QuoteIdent(c.Name))
	}
	v.recopy = "REPLACE INTO " + v.dst + " (" + strings.Join(names, ",") + ") SELECT " + strings.Join(names, ",") + " FROM " + v.src + " WHERE %s"
	var join []string
	for _, k := range quotedKey {
		join = append(join, "s."+k+" = "+v.dst+"."+k)
	}
	// Single-table DELETE with NOT EXISTS: a multi-table DELETE resolves its target alias
	// against the session's default database, which the control connection does not have.
	v.orphans = "DELETE FROM " + v.dst + " WHERE %s AND NOT EXISTS (SELECT 1 FROM " + v.src + " s WHERE " + strings.Join(join, " AND ") + ")"
	return v.run(ctx, quotedKey)
}

func (v *verifier) run(ctx context.Context, quotedKey []string) (Result, error) {
	start := time.Now()
	var res Result
	var lo []any
	size := 2000
	for {
		hi, err := v.boundary(ctx, lo, size)
		if err != nil {
			return res, err
		}
		where, args := v.rangeWhere(quotedKey, lo, hi, "")
		rows, repaired, took, lockHeld, err := v.chunk(ctx, quotedKey, lo, hi, where, args)
		if err != nil {
			return res, err
		}
		res.Chunks++
		res.Rows += rows
		res.LockTime += lockHeld
		if repaired {
			res.Repaired++
		}
		if hi == nil {
			res.Duration = time.Since(start)
			return res, nil
		}
		// Size by the checksum time only: the lock and catch-up cost per chunk is fixed, so
		// counting it would shrink chunks toward that overhead and make verification crawl.
		// Long chunks while nobody waits for the table, short ones (and a rest) when somebody does.
		target := v.cfg.IdleChunkTime
		if v.waits.Contended(ctx) {
			target = v.cfg.ChunkTime
			select {
			case <-time.After(time.Duration(float64(lockHeld) * v.cfg.RestRatio)):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		if took > 0 && !repaired {
			size = max(500, min(size*2, int(float64(size)*float64(target)/float64(took))))
		}
		lo = hi
	}
}

// rangeWhere is "lo < key <= hi" (open ends when nil), with columns prefixed by alias.
func (v *verifier) rangeWhere(quotedKey []string, lo, hi []any, alias string) (string, []any) {
	key := quotedKey
	if alias != "" {
		key = make([]string, len(quotedKey))
		for i, k := range quotedKey {
			key[i] = alias + "." + k
		}
	}
	conds := []string{"1=1"}
	var args []any
	if lo != nil {
		conds = append(conds, table.AfterPredicate(key))
		args = append(args, table.AfterArgs(lo)...)
	}
	if hi != nil {
		conds = append(conds, "NOT "+table.AfterPredicate(key))
		args = append(args, table.AfterArgs(hi)...)
	}
	return strings.Join(conds, " AND "), args
}

func (v *verifier) boundary(ctx context.Context, lo []any, size int) ([]any, error) {
	var row *sql.Row
	if lo == nil {
		row = v.db.QueryRowContext(ctx, v.bound[0], size-1)
	} else {
		row = v.db.QueryRowContext(ctx, v.bound[1], append(table.AfterArgs(lo), size-1)...)
	}
	vals, err := dbconn.ScanValues(row, len(v.keyCols))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("verify: chunk boundary: %w", err)
	}
	// Integer keys travel as integers: compared as text they would be compared as doubles.
	for i, val := range vals {
		if b, ok := val.([]byte); ok && v.intKey[i] {
			if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
				vals[i] = n
			} else if u, err := strconv.ParseUint(string(b), 10, 64); err == nil {
				vals[i] = u
			}
		}
	}
	return vals, nil
}

// maxRepairs bounds how often one chunk is recopied before verification gives up.
const maxRepairs = 3

// chunk verifies one key range, recopying it while it differs. It returns the rows compared,
// whether it recopied, the checksum time of the last comparison and the total lock hold time.
func (v *verifier) chunk(ctx context.Context, quotedKey []string, lo, hi []any, where string, args []any) (int64, bool, time.Duration, time.Duration, error) {
	var held time.Duration
	for attempt := 0; ; attempt++ {
		n, same, sumTime, h, err := v.compare(ctx, where, args)
		held += h
		if err != nil || same {
			return n, attempt > 0, sumTime, held, err
		}
		if attempt == maxRepairs {
			return 0, true, 0, held, fmt.Errorf("%w in key range %v..%v after %d recopies", ErrMismatch, lo, hi, maxRepairs)
		}
		v.cfg.Log("verify: key range %v..%v differs; recopying it", lo, hi)
		h, err = v.repair(ctx, quotedKey, lo, hi, where, args)
		held += h
		if err != nil {
			return 0, true, 0, held, err
		}
	}
}

// compare checksums the range in source and shadow at one consistent point: the source is
// read-locked (MyISAM has no snapshots), and replay is given time to apply every change made
// before the lock, so both sides show the same moment.
func (v *verifier) compare(ctx context.Context, where string, args []any) (n int64, same bool, sumTime, held time.Duration, err error) {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return 0, false, 0, 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+v.src+" READ"); err != nil {
		return 0, false, 0, 0, fmt.Errorf("verify: lock %s: %w", v.src, err)
	}
	locked := time.Now()
	defer func() {
		conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
		held = time.Since(locked)
	}()
	pos, err := binlog.CurrentPosition(ctx, conn)
	if err != nil {
		return 0, false, 0, 0, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, v.cfg.CatchUp)
	err = v.replay.WaitFor(waitCtx, pos)
	cancel()
	if err != nil {
		return 0, false, 0, 0, fmt.Errorf("verify: replay did not reach %s within %s", pos, v.cfg.CatchUp)
	}
	t0 := time.Now()
	// Both sides at once: the shadow is stable too (its replay has nothing left to apply).
	type sum struct {
		n, sum int64
		err    error
	}
	dstDone := make(chan sum, 1)
	go func() {
		n, s, err := v.checksum(ctx, v.db, v.dst, where, args)
		dstDone <- sum{n, s, err}
	}()
	srcN, srcSum, err := v.checksum(ctx, conn, v.src, where, args)
	dst := <-dstDone
	if err != nil {
		return 0, false, 0, 0, err
	}
	if dst.err != nil {
		return 0, false, 0, 0, dst.err
	}
	return srcN, srcN == dst.n && srcSum == dst.sum, time.Since(t0), 0, nil
}

// repair recopies the range from the source in one locked session. It cannot run beside
// compare's READ lock from another connection: MyISAM queues a new read behind waiting writers,
// which wait for that lock. The shadow is write-locked too, so replay pauses; the changes it then
// applies are the ones made up to this moment, in order, which leave each row as copied here.
func (v *verifier) repair(ctx context.Context, quotedKey []string, lo, hi []any, where string, args []any) (time.Duration, error) {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+v.src+" READ, "+v.src+" AS s READ, "+v.dst+" WRITE"); err != nil {
		return 0, fmt.Errorf("verify: lock for recopy: %w", err)
	}
	locked := time.Now()
	defer conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(v.recopy, where), args...); err != nil {
		return time.Since(locked), fmt.Errorf("verify: recopy: %w", err)
	}
	dWhere, dArgs := v.rangeWhere(quotedKey, lo, hi, v.dst)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(v.orphans, dWhere), dArgs...); err != nil {
		return time.Since(locked), fmt.Errorf("verify: remove rows missing from the source: %w", err)
	}
	return time.Since(locked), nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (v *verifier) checksum(ctx context.Context, q querier, tbl, where string, args []any) (int64, int64, error) {
	var n, sum int64
	if err := q.QueryRowContext(ctx, fmt.Sprintf(v.sum, tbl, where), args...).Scan(&n, &sum); err != nil {
		return 0, 0, fmt.Errorf("verify: checksum %s: %w", tbl, err)
	}
	return n, sum, nil
}
