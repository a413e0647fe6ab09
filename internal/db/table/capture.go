package table

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// ChangeLogName is the table where capture triggers note changed keys: `t_emchg` while apply
// captures the original's changes, `t_emchb` while the converted table's changes are captured
// back for a rollback. It sorts after name, like SwapName: sessions take metadata locks in name
// order for LOCK TABLES, and an application statement takes the table's before its trigger's log,
// so a sync locking the log first would deadlock with it (error 1213, seen with an InnoDB source).
func ChangeLogName(name string, back bool) string {
	if back {
		return name + "_emchb"
	}
	return name + "_emchg"
}

// CaptureTriggerPrefix starts the name of every capture trigger: what cleanup and the trigger
// carrier recognise them by.
const CaptureTriggerPrefix = "_emcap_"

// IsCaptureTrigger says whether a trigger is one of enginemig's capture triggers.
func IsCaptureTrigger(name string) bool { return strings.HasPrefix(name, CaptureTriggerPrefix) }

// CaptureSQL spells trigger capture: AFTER INSERT/UPDATE/DELETE triggers on the source note each
// changed row's key in a MyISAM change log, and a sync brings those keys' current rows into the
// target. The log is non-transactional on purpose: a note survives whatever happens to the
// statement or transaction that made it (see shadow/triggercapture.go for why that matters).
type CaptureSQL struct {
	q       *SQL
	keyDefs []string // the key columns' definitions, as in the source
	log     string   // qualified
	logName string
	schema  string
	names   [3]string // INSERT, UPDATE, DELETE trigger names
}

// Capture prepares the capture statements for q's source and target, through the change log
// named log (in the same schema).
func (s *SQL) Capture(src *Info, log string) *CaptureSQL {
	sum := sha1.Sum([]byte(src.Schema + "\x00" + src.Name + "\x00" + s.dst))
	base := CaptureTriggerPrefix + hex.EncodeToString(sum[:])[:16]
	c := &CaptureSQL{q: s, log: dbconn.QualifiedName(src.Schema, log), logName: log, schema: src.Schema,
		names: [3]string{base + "_i", base + "_u", base + "_d"}}
	for _, name := range s.keyNames {
		col, _ := src.Column(name)
		def := dbconn.QuoteIdent(col.Name) + " " + col.ColumnType
		if col.Charset != "" {
			def += " CHARACTER SET " + col.Charset + " COLLATE " + col.Collation
		}
		if col.Nullable {
			def += " NULL" // a keyless table's chunk key may hold NULLs
		} else {
			def += " NOT NULL"
		}
		c.keyDefs = append(c.keyDefs, def)
	}
	return c
}

// Schema is where the source, the log and the triggers are.
func (c *CaptureSQL) Schema() string { return c.schema }

// Source is the table the capture triggers sit on: its schema and name, unquoted.
func (c *CaptureSQL) Source() (schema, name string) { return c.q.SourceTable() }

// Log is the change log's qualified name.
func (c *CaptureSQL) Log() string { return c.log }

// LogName is the change log's name, unquoted (in Schema).
func (c *CaptureSQL) LogName() string { return c.logName }

// TriggerNames are the three capture triggers' names (INSERT, UPDATE, DELETE).
func (c *CaptureSQL) TriggerNames() []string { return c.names[:] }

// CreateLog makes the change log: an id that orders the notes and the copy key's columns, with
// the source's own types, character sets and collations, so a key compares in the log as in the
// table. (Not CREATE ... SELECT: MySQL refuses it for MyISAM under GTID consistency.)
func (c *CaptureSQL) CreateLog() string {
	return "CREATE TABLE IF NOT EXISTS " + c.log + " (`_emcap_id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, " +
		strings.Join(c.keyDefs, ", ") + ") ENGINE=MyISAM"
}

// CreateTriggers are the three AFTER triggers. An UPDATE notes the old key, and the new one when
// the key changed (<=> compares with the key's collation, as the table's unique index does).
func (c *CaptureSQL) CreateTriggers() []string {
	note := func(img string) string {
		vals := make([]string, len(c.q.key))
		for i, k := range c.q.key {
			vals[i] = img + "." + k
		}
		return "INSERT INTO " + c.log + " (" + c.q.keyList + ") VALUES (" + strings.Join(vals, ",") + ")"
	}
	same := make([]string, len(c.q.key))
	for i, k := range c.q.key {
		same[i] = "OLD." + k + " <=> NEW." + k
	}
	on := " ON " + c.q.src + " FOR EACH ROW "
	return []string{
		"CREATE TRIGGER " + dbconn.QualifiedName(c.schema, c.names[0]) + " AFTER INSERT" + on + note("NEW"),
		"CREATE TRIGGER " + dbconn.QualifiedName(c.schema, c.names[1]) + " AFTER UPDATE" + on + "BEGIN " + note("OLD") +
			"; IF NOT (" + strings.Join(same, " AND ") + ") THEN " + note("NEW") + "; END IF; END",
		"CREATE TRIGGER " + dbconn.QualifiedName(c.schema, c.names[2]) + " AFTER DELETE" + on + note("OLD"),
	}
}

// DropTriggers removes the capture triggers, wherever the table they sit on has been renamed to.
func (c *CaptureSQL) DropTriggers() []string {
	out := make([]string, len(c.names))
	for i, n := range c.names {
		out[i] = "DROP TRIGGER IF EXISTS " + dbconn.QualifiedName(c.schema, n)
	}
	return out
}

// DropLog removes the change log.
func (c *CaptureSQL) DropLog() string { return "DROP TABLE IF EXISTS " + c.log }

// Lock is what a session must hold for a sync: the source read-locked, so that nothing changes
// it meanwhile, and the target and the log to write.
func (c *CaptureSQL) Lock() string {
	return "LOCK TABLES " + c.q.src + " READ, " + strings.Join(c.LockWith(), ", ")
}

// LockSource is what a session holds for a sync that reads the notes and rows and has another
// session write them (on a Galera node): the source read-locked and the log, both MyISAM. No table
// that commits through the cluster is in it, so nothing the session holds can be what a DDL in
// total-order isolation waits for while the writes wait behind that DDL.
func (c *CaptureSQL) LockSource() string {
	return "LOCK TABLES " + c.q.src + " READ, " + c.log + " WRITE"
}

// ForgetNotes deletes the notes up to the id given, once their keys are synced.
func (c *CaptureSQL) ForgetNotes() string { return "DELETE FROM " + c.log + " WHERE `_emcap_id` <= ?" }

// LockWith is the target's and the log's part of a LOCK TABLES list (verification adds it to
// its own, and syncs under its lock).
func (c *CaptureSQL) LockWith() []string { return []string{c.q.dst + " WRITE", c.log + " WRITE"} }

// SwapLockWith is what the cut-over locks with the source and its sentry: the log only, READ, so
// that other sessions can read it while the locked session reads the source (SyncForSwap).
func (c *CaptureSQL) SwapLockWith() []string { return []string{c.log + " READ"} }

// NoteRange reads the oldest and the newest note's id (0, 0: the log is empty).
func (c *CaptureSQL) NoteRange() string {
	return "SELECT COALESCE(MIN(`_emcap_id`), 0), COALESCE(MAX(`_emcap_id`), 0) FROM " + c.log
}

// LastNote reads the newest note's id (0: the log is empty).
func (c *CaptureSQL) LastNote() string { return "SELECT COALESCE(MAX(`_emcap_id`), 0) FROM " + c.log }

// NotesHandedOut reads the highest note id the log has handed out (0: none), synced or not, from
// information_schema, which opens the log under a metadata lock no LOCK TABLES waits for. Reading
// the log itself would make an application's LOCK TABLES t WRITE (which locks the log for the
// triggers) wait for the log after it got t; MariaDB retries such a LOCK TABLES, and with several
// triggers writing the log the retried one fails the first write under it (error 1442) after
// MyISAM kept the row, whose note is then lost. MySQL caches these figures
// (information_schema_stats_expiry), so only MariaDB uses this.
func (c *CaptureSQL) NotesHandedOut() string {
	return "SELECT COALESCE(MAX(AUTO_INCREMENT), 1) - 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = " +
		dbconn.QuoteString(c.schema) + " AND TABLE_NAME = " + dbconn.QuoteString(c.logName)
}

// Sync brings the keys noted up to the id given as each statement's argument from the source to
// the target: it deletes them from the target, copies the source's current rows for them, and
// forgets the notes. Run in this order under Lock. The delete joins a derived table (a
// single-table DELETE with IN (subquery) scans the whole target on MariaDB 10.11); the copy's
// IN (subquery) is a semi-join.
func (c *CaptureSQL) Sync() [3]string {
	return c.sync("")
}

// sync is Sync with the noted keys narrowed by and (" AND ..." on the log's key columns).
// A NULLable key (a keyless table's chunk key) is matched with <=>, and its rows are copied
// through a join, as (k) IN (subquery) never matches NULL.
func (c *CaptureSQL) sync(and string) [3]string {
	noted := "SELECT DISTINCT " + c.q.keyList + " FROM " + c.log + " WHERE `_emcap_id` <= ?" + and
	eq := " = "
	if slices.Contains(c.q.keyNull, true) {
		eq = " <=> "
	}
	on := make([]string, len(c.q.key))
	for i, k := range c.q.key {
		on[i] = c.q.dst + "." + k + eq + "`_emcap_l`." + k
	}
	return [3]string{
		"DELETE " + c.q.dst + " FROM " + c.q.dst + " JOIN (" + noted + ") `_emcap_l` ON " + strings.Join(on, " AND "),
		c.q.verb(Replace) + c.q.dst + " (" + c.q.colList + ") " + c.readNoted(noted),
		c.ForgetNotes(),
	}
}

// readNoted reads the source's current rows of the keys noted selects.
func (c *CaptureSQL) readNoted(noted string) string {
	if !slices.Contains(c.q.keyNull, true) {
		return "SELECT " + c.q.colList + " FROM " + c.q.src + " " + c.q.forceKey + " WHERE (" + c.q.keyList + ") IN (" + noted + ")"
	}
	cols, on := make([]string, len(c.q.cols)), make([]string, len(c.q.key))
	for i, col := range c.q.cols {
		cols[i] = c.q.src + "." + col
	}
	for i, k := range c.q.key {
		on[i] = c.q.src + "." + k + " <=> `_emcap_l`." + k
	}
	return "SELECT " + strings.Join(cols, ",") + " FROM (" + noted + ") `_emcap_l` JOIN " + c.q.src + " " + c.q.forceKey +
		" ON " + strings.Join(on, " AND ")
}

// SyncUpTo is Sync for a keyless table while its copy runs (shadow/order.go, rule 5): a note's
// key is a group of rows sharing the chunk key's value, and only groups up to the copy's
// watermark hi (every key part, compared by the server in the index's order) are synced again,
// whole; the copy reads the others later. The notes up to the id go either way. The first two
// statements take the id and then hiArgs, the third the id.
func (c *CaptureSQL) SyncUpTo(hi []any) (stmts [3]string, hiArgs []any) {
	upTo, args := upToKey(c.q.keyParts(""), hi)
	return c.sync(" AND " + upTo), args
}

// SyncForSwap is the sync of the cut-over, whose locked session holds the source and the log but
// may not hold the target: it reads the noted keys and their current rows with these, and another
// session deletes the keys and writes the rows (DeleteKeys, WriteRows). Both take the last
// note's id. The notes stay: the log goes with the swap.
func (c *CaptureSQL) SyncForSwap() (notedKeys, readNoted string) {
	noted := "SELECT DISTINCT " + c.q.keyList + " FROM " + c.log + " WHERE `_emcap_id` <= ?"
	return noted, c.readNoted(noted)
}
