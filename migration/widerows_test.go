package migration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// wideRow is the size of each row's value in TestWideRowsStayWithinMemory: rows of several MB, as
// a wiki's page text or a forum's attachments are (MEDIUMBLOB holds up to 16 MB).
const wideRow = 2 << 20

// A table whose rows are several MB each converts with the defaults while the application
// rewrites them, every acknowledged write lands, and enginemig's memory stays bounded by a few
// rows, not by the table: its heap at its peak grows by less than a third of the table's size
// (100 rows of 2 MB). The copy and verification run on the server; replay reads each change's
// row images from the binlog and writes them back, so what bounds the events it reads ahead, its
// batches and its statements (binlog's streamReadAhead, maxBatchBytes, maxStatementBytes) is what
// this test watches. With go-mysql's default read-ahead the heap grew by 380-416 MB; with replay's
// statements bounded by rows only, one of 24 rows (48 MB) lost its connection to the server's
// max_allowed_packet.
func TestWideRowsStayWithinMemory(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	const rows = 100
	for _, tbl := range []string{"t", "ref"} {
		// sdb has the schema as its database: MySQL refuses this INSERT ... SELECT without one (1046).
		sandboxtest.MustExec(t, sdb, "CREATE TABLE "+dbconn.QualifiedName(schema, tbl)+
			" (id INT PRIMARY KEY, n INT NOT NULL, b LONGBLOB NOT NULL) ENGINE=MyISAM")
		sandboxtest.MustExec(t, sdb, fmt.Sprintf("INSERT INTO %s SELECT seq, 0, REPEAT(SHA2(seq, 256), %d) FROM %s",
			dbconn.QualifiedName(schema, tbl), wideRow/64, sandboxtest.Seq(rows)))
	}
	stop, acked := rewriteWideRows(t, srv.Config(schema).FormatDSN(), rows)
	stopWatch := watchHeap()
	_, err := Run(context.Background(), db, testOptions(srv, schema, "t"))
	time.Sleep(300 * time.Millisecond) // writes after the swap land in the InnoDB table
	stop()
	grew := stopWatch()
	if err != nil {
		t.Fatal(err)
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("not converted")
	}
	if n := acked(); n < 20 {
		t.Fatalf("only %d rewrites acknowledged while apply ran: the test did not test writes", n)
	}
	sum := func(tbl string) string {
		var s string
		q := "SELECT CONCAT(COUNT(*), '/', SUM(n), '/', BIT_XOR(CRC32(CONCAT(id, ':', n, ':', SHA2(b, 256))))) FROM " + dbconn.QualifiedName(schema, tbl)
		if err := db.QueryRow(q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if a, b := sum("t"), sum("ref"); a != b {
		t.Fatalf("the converted table differs from the acknowledged writes: t %s, ref %s", a, b)
	}
	table := int64(rows * wideRow)
	t.Logf("%d rewrites of 2 MB rows acknowledged; the heap grew by at most %d MB (the table holds %d MB)", acked(), grew>>20, table>>20)
	if grew > table/3 {
		t.Fatalf("enginemig's heap grew by %d MB at its peak, over a third of the %d MB table: memory follows the table, not its widest row", grew>>20, table>>20)
	}
}

// rewriteWideRows runs a writer that rewrites random rows of t and ref with the same new 2 MB
// value (the server makes it) and a counter, and counts the rewrites acknowledged.
func rewriteWideRows(t *testing.T, dsn string, rows int) (stop func(), acked func() int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n atomic.Int64
	var failed atomic.Value
	for w := range 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				failed.Store(err)
				return
			}
			defer db.Close()
			conn, err := db.Conn(ctx)
			if err != nil {
				return
			}
			defer conn.Close()
			r := rand.New(rand.NewPCG(uint64(w), 63))
			for ctx.Err() == nil {
				id := 1 + r.IntN(rows)
				stmts := []string{fmt.Sprintf("SET @v = REPEAT(SHA2(RAND(), 256), %d)", wideRow/64),
					fmt.Sprintf("UPDATE t SET n = n + 1, b = @v WHERE id = %d", id),
					fmt.Sprintf("UPDATE ref SET n = n + 1, b = @v WHERE id = %d", id)}
				for _, s := range stmts {
					if _, err := conn.ExecContext(context.WithoutCancel(ctx), s); err != nil {
						failed.Store(fmt.Errorf("%s: %w", s[:30], err))
						return
					}
				}
				n.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	return func() {
			cancel()
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				t.Errorf("writer: %v", err)
			}
		}, func() int64 {
			return n.Load()
		}
}

// watchHeap samples this process's heap every 10 ms; stop returns how far it rose above where it
// stood at the start.
func watchHeap() (stop func() int64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	base := read()
	peak := &atomic.Int64{}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-finished
		return max(peak.Load()-base, 0)
	}
}

// A client-side copy reads each chunk whole into enginemig, and the next while it writes one: its
// chunks are capped at clientChunkBytes of the table's average row, below a Galera node's cap
// when that is higher. (Uncapped, the 100 rows of 2 MB above were one chunk: the heap grew by 239
// MB; capped, 100-137 MB, the rest being the copy's own writes read back from the binlog.)
func TestClientSideChunksCappedByBytes(t *testing.T) {
	for _, c := range []struct {
		clientSide  bool
		rows, bytes int64
		galera      int
		want        int
	}{
		{true, 100, 100 * wideRow, 0, clientChunkBytes / wideRow},
		{true, 1_000_000, 200_000_000, 0, clientChunkBytes / 200},
		{true, 100, 100 * 64 * wideRow, 0, 1}, // rows larger than the cap: one at a time
		{true, 100, 100 * wideRow, 2, 2},      // Galera's cap is lower
		{false, 100, 100 * wideRow, 0, 0},     // server-side: no cap
		{false, 100, 100 * wideRow, 7, 7},
	} {
		m := &migrator{ti: &table.Info{Rows: c.rows, DataLength: c.bytes}, galeraMaxChunk: c.galera}
		m.opts.ClientSide = c.clientSide
		if got := m.copyMaxChunk(); got != c.want {
			t.Errorf("client-side %v, %d rows of %d bytes, Galera's cap %d: cap %d, want %d", c.clientSide, c.rows, c.bytes/c.rows, c.galera, got, c.want)
		}
	}
}
