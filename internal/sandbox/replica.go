package sandbox

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"
)

// replicaStartTimeout bounds how long the replication threads may take to report running: the IO
// thread connects over loopback, which takes milliseconds unless the machine is overloaded.
const replicaStartTimeout = 30 * time.Second

// nextReplicaID hands out server ids 2, 3, ... so replicas of one primary (and of each other's
// primaries within a test binary) never share an id, which replication refuses.
var nextReplicaID atomic.Int64

func init() { nextReplicaID.Store(1) }

// StartReplica starts another sandbox server (binlog on, like the primary) and makes it replicate
// from primary: classic file/position replication from the primary's current SHOW MASTER STATUS
// position, as root over 127.0.0.1. It returns once both replication threads run. opts.ServerID
// 0 picks a fresh id of 2 or more.
func StartReplica(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	if opts.ServerID == 0 {
		opts.ServerID = int(nextReplicaID.Add(1))
	}
	primaryID := primary.opts.ServerID
	if primaryID == 0 {
		primaryID = 1
	}
	if opts.ServerID == primaryID {
		return nil, fmt.Errorf("sandbox: replica server id %d equals the primary's", opts.ServerID)
	}
	file, pos, err := primary.masterPosition(ctx)
	if err != nil {
		return nil, err
	}
	r, err := Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("sandbox: start replica: %w", err)
	}
	if err := r.replicateFrom(ctx, primary, file, pos); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

func (s *Server) masterPosition(ctx context.Context) (file string, pos int64, err error) {
	db, err := s.Open("")
	if err != nil {
		return "", 0, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return "", 0, fmt.Errorf("sandbox: SHOW MASTER STATUS on primary: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", 0, err
	}
	if !rows.Next() {
		return "", 0, fmt.Errorf("sandbox: primary has no binlog (started with BinlogFormat OFF?)")
	}
	// The column count differs between versions; only the first two matter.
	vals := make([]any, len(cols))
	vals[0], vals[1] = &file, &pos
	for i := 2; i < len(vals); i++ {
		vals[i] = new(sql.RawBytes)
	}
	if err := rows.Scan(vals...); err != nil {
		return "", 0, fmt.Errorf("sandbox: read SHOW MASTER STATUS: %w", err)
	}
	return file, pos, rows.Err()
}

func (s *Server) replicateFrom(ctx context.Context, primary *Server, file string, pos int64) error {
	db, err := s.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	// MASTER_USE_GTID=no: both servers start from the same pristine datadir, and file/position
	// replication is what the tool's users most often have. A 1 s connect retry lets tests that
	// restart the primary see replication resume quickly.
	change := fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', "+
		"MASTER_PASSWORD='', MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d, MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1",
		primary.Port, file, pos)
	if _, err := db.ExecContext(ctx, change); err != nil {
		return fmt.Errorf("sandbox: CHANGE MASTER TO on replica: %w", err)
	}
	if _, err := db.ExecContext(ctx, "START SLAVE"); err != nil {
		return fmt.Errorf("sandbox: START SLAVE: %w", err)
	}
	return waitReplicaThreads(ctx, db, true, true)
}

// ReplicaStatus is the part of SHOW SLAVE STATUS tests look at.
type ReplicaStatus struct {
	IORunning, SQLRunning bool
	LastIOError           string
	LastSQLError          string
	// ExecutedFile and ExecutedPos are where the SQL thread stands in the primary's binlog.
	ExecutedFile, ExecutedPos string
}

// ReplicaStatus reads SHOW SLAVE STATUS on s.
func (s *Server) ReplicaStatus(ctx context.Context) (ReplicaStatus, error) {
	db, err := s.Open("")
	if err != nil {
		return ReplicaStatus{}, err
	}
	defer db.Close()
	return readReplicaStatus(ctx, db)
}

func readReplicaStatus(ctx context.Context, db *sql.DB) (ReplicaStatus, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return ReplicaStatus{}, fmt.Errorf("sandbox: SHOW SLAVE STATUS: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return ReplicaStatus{}, err
	}
	if !rows.Next() {
		return ReplicaStatus{}, fmt.Errorf("sandbox: server is not a replica")
	}
	raw := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return ReplicaStatus{}, fmt.Errorf("sandbox: read SHOW SLAVE STATUS: %w", err)
	}
	var st ReplicaStatus
	for i, c := range cols {
		switch c {
		case "Slave_IO_Running":
			st.IORunning = raw[i].String == "Yes"
		case "Slave_SQL_Running":
			st.SQLRunning = raw[i].String == "Yes"
		case "Last_IO_Error":
			st.LastIOError = raw[i].String
		case "Last_SQL_Error":
			st.LastSQLError = raw[i].String
		case "Relay_Master_Log_File":
			st.ExecutedFile = raw[i].String
		case "Exec_Master_Log_Pos":
			st.ExecutedPos = raw[i].String
		}
	}
	return st, rows.Err()
}

// waitReplicaThreads polls until the IO and SQL threads are in the wanted states.
func waitReplicaThreads(ctx context.Context, db *sql.DB, io, sqlThread bool) error {
	ctx, cancel := context.WithTimeout(ctx, replicaStartTimeout)
	defer cancel()
	var st ReplicaStatus
	var err error
	for {
		st, err = readReplicaStatus(ctx, db)
		if err == nil && st.IORunning == io && st.SQLRunning == sqlThread {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("sandbox: replication threads not ready: %w", err)
			}
			return fmt.Errorf("sandbox: replication threads not ready (io=%v sql=%v, want io=%v sql=%v; io error %q, sql error %q): %w",
				st.IORunning, st.SQLRunning, io, sqlThread, st.LastIOError, st.LastSQLError, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StopReplicaSQL stops the replica's SQL thread (the IO thread keeps fetching events), so tests can
// make replication lag grow on demand.
func (s *Server) StopReplicaSQL(ctx context.Context) error {
	return s.replicaCommand(ctx, "STOP SLAVE SQL_THREAD", true, false)
}

// StartReplicaSQL starts the SQL thread again; the replica then catches up.
func (s *Server) StartReplicaSQL(ctx context.Context) error {
	return s.replicaCommand(ctx, "START SLAVE SQL_THREAD", true, true)
}

func (s *Server) replicaCommand(ctx context.Context, stmt string, io, sqlThread bool) error {
	db, err := s.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("sandbox: %s: %w", stmt, err)
	}
	return waitReplicaThreads(ctx, db, io, sqlThread)
}

// SyncReplica waits until replica has applied everything primary has binlogged so far, so a test
// can read on the replica what it wrote on the primary. It waits as long as the replica's SQL
// thread runs and moves on: a statement-based replica of a loaded 2-core machine may be minutes
// behind, and a fixed limit would fail a replica that is only slow. It gives up when the thread
// stops, or when it applied nothing for syncStill.
func SyncReplica(ctx context.Context, primary, replica *Server) error {
	file, pos, err := primary.masterPosition(ctx)
	if err != nil {
		return err
	}
	db, err := replica.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	last := ""
	for {
		var res sql.NullInt64
		// MASTER_POS_WAIT returns NULL when the SQL thread is not running, -1 on timeout.
		if err := db.QueryRowContext(ctx, "SELECT MASTER_POS_WAIT(?, ?, ?)", file, pos, int(syncStill/time.Second)).Scan(&res); err != nil {
			return fmt.Errorf("sandbox: MASTER_POS_WAIT: %w", err)
		}
		if res.Valid && res.Int64 >= 0 {
			return nil
		}
		st, err := readReplicaStatus(ctx, db)
		if err != nil {
			return err
		}
		at := st.ExecutedFile + ":" + st.ExecutedPos
		if !res.Valid || !st.SQLRunning {
			return fmt.Errorf("sandbox: replica did not reach %s:%d: its SQL thread stopped at %s: %s", file, pos, at, st.LastSQLError)
		}
		if at == last {
			return fmt.Errorf("sandbox: replica did not reach %s:%d: it applied nothing for %s (at %s)", file, pos, syncStill, at)
		}
		last = at
	}
}

// syncStill is how long SyncReplica waits for a replica that applies nothing.
const syncStill = 30 * time.Second
