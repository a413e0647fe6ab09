package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

func init() {
	registerTable("keyless", Warning,
		"no PRIMARY KEY and no UNIQUE key whose columns are all NOT NULL: apply addresses rows by their whole content (binlog capture only), and InnoDB without a primary key has costs of its own",
		checkKeyless)
	registerTable("keyless-hold", Blocker,
		"a table without a unique key and without an index to walk is copied in one chunk, and the estimated copy would hold the application's writes longer than --max-hold",
		checkKeylessHold)
	registerTable("no-usable-key", Blocker,
		"a table without a unique key or an index to walk, and the capture would be triggers: only binlog capture can convert it",
		checkNoUsableKey)
	registerTable("require-pk-setting", Blocker,
		"sql_require_primary_key / innodb_force_primary_key would refuse the shadow, or sql_generate_invisible_primary_key would add a column",
		checkRequirePK)
}

// walkable says which indexes a keyless table's copy can walk (table.Column.ChunkOrder).
const walkable = "one led by an integer, DECIMAL, date or time, ENUM, or a whole CHAR or VARCHAR column; not by a SET, FLOAT, DOUBLE, BIT, BLOB or TEXT column, or a prefix"

func hasPrimary(in *TableInput) bool {
	for _, ix := range in.Info.Indexes {
		if ix.Name == "PRIMARY" {
			return true
		}
	}
	return false
}

func keylessTable(in *TableInput) bool {
	return in.Info != nil && in.Crashed == "" && len(in.Info.Columns) > 0 && !isMerge(in) && in.Info.Keyless()
}

func checkNoUsableKey(in *TableInput) []Finding {
	if !keylessTable(in) || in.Server == nil || !in.Server.capturesWithTriggers() {
		return nil
	}
	if _, ok := in.Info.ChunkKey(); ok {
		return nil // trigger capture notes the chunk key's values
	}
	return []Finding{newFinding("no-usable-key", Blocker,
		"no PRIMARY KEY, no UNIQUE index on NOT NULL columns and no index a copy can walk ("+walkable+"), and changes would be captured with triggers, which note a key to sync by: these rows have none",
		"turn on the binlog for binlog capture (log_bin, binlog_format=ROW, binlog_row_image=FULL) and use --capture binlog, or add such an index; then plan again")}
}

// checkKeyless says how apply will address the rows of a table without a unique key, what that
// costs online, and why an InnoDB table without a primary key is a problem of its own.
func checkKeyless(in *TableInput) []Finding {
	if !keylessTable(in) {
		return nil
	}
	var how string
	if ix, ok := in.Info.ChunkKey(); ok {
		how = fmt.Sprintf("the copy walks index %s by %s in short chunks%s, and each replayed change finds its row through that index (its cost grows with the number of rows sharing a value)",
			dbconn.QuoteIdent(ix.Name), quotedList(ix.ColumnNames()), keylessHold(in, ix))
	} else {
		hold := "the whole copy"
		if in.Estimate != nil && in.Estimate.CopySeconds > 0 {
			hold = fmt.Sprintf("about %.1f s (the estimated copy)", in.Estimate.CopySeconds)
		}
		how = "no index can be walked (" + walkable + "): the copy reads the table in one chunk, which holds the application's writes for " + hold +
			", and each replayed change scans the shadow to find its row"
	}
	cost := "on InnoDB a table without a primary key is clustered on a hidden row id drawn from one server-wide counter, a replica applying ROW events finds each row with a full scan, and Galera cannot replicate its DELETEs"
	var key string
	remedy := "convert it as it is; then give it a primary key when a maintenance window allows (ALTER TABLE ... ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY), or add an index first (on the most distinct column an integer, DECIMAL, date or time, ENUM, CHAR or VARCHAR) to copy it in short chunks"
	switch {
	case addsRowID(in):
		key = ". Apply gives the InnoDB table an invisible auto-increment primary key, " + table.RowIDColumn + ", which SELECT * and INSERT without a column list do not see, because " + cost
		remedy = "nothing to do; --keep-keyless converts it without the added key"
	case hasAutoIncrement(in):
		key = ". It keeps no primary key on InnoDB (it has an AUTO_INCREMENT column already, and a table has at most one): " + cost
	default:
		key = ". This server has no INVISIBLE columns, so it keeps no primary key on InnoDB: " + cost
	}
	return []Finding{newFinding("keyless", Warning,
		"no PRIMARY KEY and no UNIQUE index on NOT NULL columns: apply addresses rows by their whole content, keeps identical rows as duplicates, and copies again from the start if resumed; "+how+key,
		remedy)}
}

func hasAutoIncrement(in *TableInput) bool {
	_, ok := in.Info.AutoIncrementColumn()
	return ok
}

// DefaultMaxHold is how long a keyless table's one-chunk copy may hold the application's writes
// unless --max-hold says otherwise: about what a web request tolerates once.
const DefaultMaxHold = time.Second

// checkKeylessHold blocks a keyless table without an index to walk whose one chunk would hold
// the writes longer than the limit.
func checkKeylessHold(in *TableInput) []Finding {
	if !keylessTable(in) || in.Estimate == nil || in.Server == nil {
		return nil
	}
	if _, ok := in.Info.ChunkKey(); ok {
		return nil
	}
	limit := in.Server.MaxHold
	if limit <= 0 {
		limit = DefaultMaxHold
	}
	hold := time.Duration(in.Estimate.CopySeconds * float64(time.Second))
	if hold <= limit {
		return nil
	}
	return []Finding{newFinding("keyless-hold", Blocker,
		fmt.Sprintf("no unique key and no index a copy can walk ("+walkable+"): the copy is one chunk, estimated at %s, and holds the application's writes all that time (limit %s)", hold.Round(time.Millisecond), limit),
		"add such an index (on MyISAM that ALTER blocks writes too, for less time than the copy), or accept the wait with --max-hold "+(hold+time.Second).Truncate(time.Second).String()+" on plan and apply, or convert it in a maintenance window")}
}

// keylessHold says how long a chunk of a keyless table walking ix is expected to hold the
// application's writes at most: a chunk cannot end inside a run of rows sharing the walked
// columns' value, so the longest chunk is about the longest run. The index statistics give the
// average run only (rows over the distinct values); a skewed column has longer ones.
func keylessHold(in *TableInput, ix table.Index) string {
	card := ix.Columns[len(ix.Columns)-1].Cardinality
	e := in.Estimate
	if card <= 0 || e == nil || e.Rows <= 0 || e.CopySeconds <= 0 {
		return " (the index statistics do not say how many rows share a value: ANALYZE TABLE would)"
	}
	run := max(1, e.Rows/card)
	perRow := e.CopySeconds / float64(e.Rows)
	hold := time.Duration(float64(run) * perRow * float64(time.Second))
	return fmt.Sprintf(" (about %d rows share a value on average, by the index statistics; a chunk takes such a run whole, which holds the application's writes for about %s, longer for a value more rows share)",
		run, max(hold, copier.DefaultChunkTime).Round(time.Millisecond))
}

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = dbconn.QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// addsRowID: apply gives the table's InnoDB copy table.RowIDColumn by default.
func addsRowID(in *TableInput) bool {
	return in.Server != nil && table.RowIDSupported(in.Server.Version) && in.Info.CanAddRowID()
}

func checkRequirePK(in *TableInput) []Finding {
	// The primary key apply adds to a keyless table satisfies both settings.
	if in.Info == nil || in.Server == nil || in.Crashed != "" || hasPrimary(in) || addsRowID(in) {
		return nil
	}
	s := in.Server
	_, usable := in.Info.CopyKey()
	var out []Finding
	switch {
	case s.VarOn("sql_require_primary_key"):
		// MySQL refuses any table without a PRIMARY KEY, even with a unique NOT NULL key (error 3750).
		out = append(out, newFinding("require-pk-setting", Blocker,
			"sql_require_primary_key=ON: the server refuses to create the shadow, which has no PRIMARY KEY (error 3750)",
			"add a PRIMARY KEY to the table (or promote its unique NOT NULL key), or turn sql_require_primary_key off for enginemig's sessions"))
	case s.VarOn("innodb_force_primary_key") && !usable:
		// MariaDB accepts a unique NOT NULL key as the primary key; only tables without one are refused (error 1173).
		out = append(out, newFinding("require-pk-setting", Blocker,
			"innodb_force_primary_key=ON: InnoDB refuses the shadow, which has no PRIMARY KEY (error 1173)",
			"add a PRIMARY KEY to the table; then plan again"))
	}
	if s.VarOn("sql_generate_invisible_primary_key") {
		out = append(out, newFinding("require-pk-setting", Warning,
			"sql_generate_invisible_primary_key=ON: the shadow would get an invisible my_row_id column the MyISAM table does not have",
			"add an explicit PRIMARY KEY first, or run enginemig with a session that sets sql_generate_invisible_primary_key=OFF"))
	}
	return out
}

// isMerge: a MERGE table is refused by merge-member; other checks about its shape add nothing.
func isMerge(in *TableInput) bool {
	return in.Info != nil && strings.EqualFold(in.Info.Engine, "MRG_MyISAM")
}
