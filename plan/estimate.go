package plan

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Projection constants: InnoDB adds a record header, a transaction id and a roll pointer to each
// row and fills its pages a little short of full; its secondary indexes come out no larger than
// the MyISAM index file. Figures: docs/bench/constants.md, "Measurements behind the code's constants".
const (
	innodbRowOverhead = 20   // bytes per row on top of MyISAM's average row length
	innodbFill        = 0.94 // page fill of a key-ordered load
	innodbIndexFactor = 1.0  // InnoDB secondary indexes vs MyISAM .MYI (rounded up from 0.94)
	innodbMinPerIndex = 16 << 10
	// binlogRowOverhead: per-row bytes a ROW event adds around the row image when the copy's
	// INSERTs are written to the binlog.
	binlogRowOverhead = 10
	// copyReadRatio: apply's copy plus index build over the time to read the same rows by key at
	// the sample's rate: about the median over real applies of three table shapes; tables larger
	// than the buffer pool copy slower still. Verification (about a third of the copy,
	// migration.verifyShare) and the cut-over are not included.
	// Figures: docs/bench/constants.md, "Measurements behind the code's constants".
	copyReadRatio = 4.5
	// copyReadRatioParallel is copyReadRatio for a table whose chunks are copied two at a time
	// (ParallelCopy): two chunks at once take about two thirds of the time of one.
	// Figures: docs/bench/constants.md, "Measurements behind the code's constants".
	copyReadRatioParallel = 3.0
	// DefaultSampleRows is how many rows the estimate reads by key. MyISAM holds a table read
	// lock while they are read: 2000 rows take a few milliseconds.
	DefaultSampleRows = 2000
)

// Estimate is the size and time projection for one table.
type Estimate struct {
	Rows           int64 `json:"rows"`
	DataBytes      int64 `json:"data_bytes"`
	IndexBytes     int64 `json:"index_bytes"`
	ProjectedBytes int64 `json:"projected_innodb_bytes"`
	// BinlogBytes is what the copy writes to the binlog (row events of every copied row).
	BinlogBytes int64 `json:"binlog_bytes"`
	// ExtraDiskBytes is the space needed while the copy runs: the shadow plus the binlog it
	// writes, plus sort files for building secondary indexes afterwards (about their size).
	ExtraDiskBytes int64 `json:"extra_disk_bytes"`
	// CopySeconds is the estimated duration of the online copy; Basis says how it was derived.
	CopySeconds float64 `json:"copy_seconds"`
	// ParallelCopy says apply will copy two chunks at once while nobody waits for the table
	// (ParallelCopy), which the estimate assumes.
	ParallelCopy  bool    `json:"parallel_copy"`
	SampleRows    int64   `json:"sample_rows"`
	SampleSeconds float64 `json:"sample_seconds"`
	Basis         string  `json:"basis"`
}

// estimateSizes projects the InnoDB size from the MyISAM figures (exact for MyISAM: TABLE_ROWS
// and DATA_LENGTH are kept up to date by the engine).
func estimateSizes(info *table.Info, binlogOn bool) Estimate {
	e := Estimate{Rows: info.Rows, DataBytes: info.DataLength, IndexBytes: info.IndexLength}
	avg := int64(0)
	if info.Rows > 0 {
		avg = info.DataLength / info.Rows
	}
	clustered := int64(float64(info.Rows*(avg+innodbRowOverhead)) / innodbFill)
	secondary := int64(float64(info.IndexLength) * innodbIndexFactor)
	floor := int64(innodbMinPerIndex * (1 + len(info.Indexes)))
	e.ProjectedBytes = max(clustered+secondary, floor)
	if binlogOn {
		e.BinlogBytes = info.Rows * (avg + binlogRowOverhead)
	}
	e.ExtraDiskBytes = e.ProjectedBytes + e.BinlogBytes + secondary
	return e
}

// measureCopy reads a sample of rows by the copy key, as the copier will, and scales the time to
// the whole table.
func measureCopy(ctx context.Context, q Querier, info *table.Info, sampleRows int64, parallel bool, e *Estimate) error {
	if info.Rows == 0 {
		e.Basis = "empty table"
		return nil
	}
	if sampleRows <= 0 {
		sampleRows = DefaultSampleRows
	}
	query := "SELECT * FROM " + info.QuotedName()
	if key, ok := info.CopyKey(); ok {
		cols := make([]string, len(key.Columns))
		for i, c := range key.Columns {
			cols[i] = dbconn.QuoteIdent(c.Name)
		}
		query += " FORCE INDEX (" + dbconn.QuoteIdent(key.Name) + ") ORDER BY " + strings.Join(cols, ", ")
	}
	query += fmt.Sprintf(" LIMIT %d", sampleRows)
	n, first, err := drain(ctx, q, query)
	// Timed from the first row: MyISAM sends it once the read has the table's lock, so the time a
	// busy application's writes kept the read waiting is not scaled up to the whole table, where
	// it made a small table look too slow to copy (docs/bench/constants.md, "Measurements behind the code's
	// constants").
	elapsed := time.Since(first)
	if err != nil {
		return fmt.Errorf("sample read of %s: %w", info.QuotedName(), err)
	}
	if n == 0 {
		e.Basis = "no rows read in the sample"
		return nil
	}
	e.SampleRows, e.SampleSeconds = n, elapsed.Seconds()
	perRow := elapsed.Seconds() / float64(n)
	ratio, how := copyReadRatio, "one chunk at a time"
	if parallel {
		ratio, how = copyReadRatioParallel, "two chunks at a time"
	}
	e.CopySeconds, e.ParallelCopy = perRow*float64(info.Rows)*ratio, parallel
	e.Basis = fmt.Sprintf("read %d rows by key in %s (%.0f rows/s), scaled to %d rows, x%.1f measured copy/read ratio copying %s",
		n, elapsed.Round(time.Microsecond), float64(n)/elapsed.Seconds(), info.Rows, ratio, how)
	return nil
}

// drain reads every row query returns and tells when the first arrived (the end of the read when
// there was none).
func drain(ctx context.Context, q Querier, query string) (n int64, first time.Time, err error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return 0, time.Now(), err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, time.Now(), err
	}
	dest := make([]any, len(cols))
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	for rows.Next() {
		if n == 0 {
			first = time.Now()
		}
		if err := rows.Scan(dest...); err != nil {
			return n, first, err
		}
		n++
	}
	if n == 0 {
		first = time.Now()
	}
	return n, first, rows.Err()
}

// EstimateTable projects one table's sizes and copy time as plan does, for apply to report its
// estimate beside what the copy took (DefaultSampleRows when sampleRows is 0).
func EstimateTable(ctx context.Context, db *sql.DB, schema, name string, sampleRows int64) (Estimate, error) {
	info, err := table.Load(ctx, db, schema, name)
	if err != nil {
		return Estimate{}, err
	}
	var logBin, version sql.NullString
	var mode sql.NullInt64
	db.QueryRowContext(ctx, "SELECT @@log_bin, VERSION(), @@innodb_autoinc_lock_mode").Scan(&logBin, &version, &mode)
	e := estimateSizes(info, logBin.String == "1" || strings.EqualFold(logBin.String, "ON"))
	parallel, _ := ParallelCopy(dbconn.MariaDB(version.String), mode.Int64, info)
	if err := measureCopy(ctx, db, info, sampleRows, parallel, &e); err != nil {
		return e, err
	}
	return e, nil
}
