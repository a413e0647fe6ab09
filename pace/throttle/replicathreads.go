package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// A replica's SQL thread that stopped on an error is not lag: it applies nothing until a person
// looks at it, and a run that only waited for the lag to shrink would wait for good (or, once the
// lag limit is raised, go on converting while a replica misses its statements). So each check
// also reads the replica's threads (SHOW REPLICA STATUS, on MariaDB 10.5+ and MySQL 8.0.22+), and
// a thread stopped with an error ends the run with that error (Stopped). One stopped without an
// error (STOP REPLICA by a person, for a while) is lag like any other: an operator who raised
// --max-lag meant to let the copy go on.

// ReplicaStoppedError is a watched replica whose SQL thread stopped on an error.
type ReplicaStoppedError struct {
	Replica string
	Errno   int
	Message string
}

func (e *ReplicaStoppedError) Error() string {
	return fmt.Sprintf("replica %s stopped replicating: its SQL thread stopped on error %d: %s", e.Replica, e.Errno, e.Message)
}

// threads is what SHOW REPLICA STATUS says of a replica's SQL thread.
type threads struct {
	read    bool // the status was read (the account may lack the privilege: then only the heartbeat counts)
	running bool
	errno   int
	message string
}

// readThreads reads the replica's SQL thread state. A server that is not a replica (no row) reads
// as running: the heartbeat says whether our writes reach it.
func readThreads(ctx context.Context, db *sql.DB) (threads, error) {
	rows, err := db.QueryContext(ctx, "SHOW REPLICA STATUS")
	if err != nil {
		return threads{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return threads{}, err
	}
	if !rows.Next() {
		return threads{read: true, running: true}, rows.Err()
	}
	raw := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return threads{}, err
	}
	th := threads{read: true, running: true}
	for i, c := range cols { // Slave_* on MariaDB, Replica_* on MySQL
		switch {
		case strings.HasSuffix(c, "_SQL_Running"):
			th.running = raw[i].String == "Yes"
		case c == "Last_SQL_Errno":
			th.errno, _ = strconv.Atoi(raw[i].String)
		case c == "Last_SQL_Error":
			th.message = raw[i].String
		}
	}
	return th, rows.Err()
}

// isAccessDenied reports a missing privilege (1227: REPLICATION CLIENT, SLAVE MONITOR).
func isAccessDenied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1227 || me.Number == 1045 || me.Number == 1044)
}

// checkReplicaThreads reads replica i's SQL thread and records it; a missing privilege is logged once
// and the threads are not read again.
func (t *Throttler) checkReplicaThreads(ctx context.Context, i int) {
	t.mu.Lock()
	skip := t.replicas[i].noThreads
	t.mu.Unlock()
	if skip {
		return
	}
	th, err := readThreads(ctx, t.replicas[i].db)
	if ctx.Err() != nil {
		return
	}
	if isAccessDenied(err) {
		if t.cfg.Logger != nil {
			t.cfg.Logger.Warn("cannot read the replica's threads (grant REPLICATION CLIENT, or SLAVE MONITOR on MariaDB): a stopped SQL thread is seen only as lag",
				"replica", t.replicas[i].name, "error", err)
		}
		t.record(func() { t.replicas[i].noThreads = true })
		return
	}
	var stopped *ReplicaStoppedError
	if err == nil && th.read && !th.running && th.errno != 0 {
		stopped = &ReplicaStoppedError{Replica: t.replicas[i].name, Errno: th.errno, Message: th.message}
	}
	t.record(func() {
		t.replicas[i].threads = th
		if stopped != nil && t.stoppedErr == nil {
			t.stoppedErr = stopped
		}
	})
}

// Stopped is the first replica found with its SQL thread stopped on an error, or nil: the run
// cannot go on as if the replica lagged.
func (t *Throttler) Stopped() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stoppedErr == nil {
		return nil
	}
	return t.stoppedErr
}
