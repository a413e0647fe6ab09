package table

import (
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// The statements a run makes on whole tables, triggers and sessions: creating, renaming and
// dropping what it puts beside the table, and what it reads of the server's settings.

// DropTable drops schema.name, which must exist.
func DropTable(schema, name string) string { return "DROP TABLE " + dbconn.QualifiedName(schema, name) }

// DropTableIfExists drops schema.name if it is there.
func DropTableIfExists(schema, name string) string {
	return "DROP TABLE IF EXISTS " + dbconn.QualifiedName(schema, name)
}

// RenameTable renames schema.from to schema.to.
func RenameTable(schema, from, to string) string { return RenameTables(schema, [2]string{from, to}) }

// RenameTables renames each pair's first table of schema to its second in one statement, which
// takes every table's metadata lock before it renames any (the cut-overs' atomic swaps).
func RenameTables(schema string, pairs ...[2]string) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = dbconn.QualifiedName(schema, p[0]) + " TO " + dbconn.QualifiedName(schema, p[1])
	}
	return "RENAME TABLE " + strings.Join(parts, ", ")
}

// DropIndexes drops the named indexes of schema.name in one ALTER.
func DropIndexes(schema, name string, indexes []string) string {
	drops := make([]string, len(indexes))
	for i, ix := range indexes {
		drops[i] = "DROP INDEX " + dbconn.QuoteIdent(ix)
	}
	return "ALTER TABLE " + dbconn.QualifiedName(schema, name) + " " + strings.Join(drops, ", ")
}

// DropTrigger drops the trigger schema.name.
func DropTrigger(schema, name string) string {
	return "DROP TRIGGER " + dbconn.QualifiedName(schema, name)
}

// LockWrite locks schema.name for writing (LOCK TABLES ... WRITE).
func LockWrite(schema, name string) string {
	return "LOCK TABLES " + dbconn.QualifiedName(schema, name) + " WRITE"
}

// ShowCreateTrigger asks for the named trigger's own definition (error 1360 when there is none).
func ShowCreateTrigger(schema, name string) string {
	return "SHOW CREATE TRIGGER " + dbconn.QualifiedName(schema, name)
}

// KillConnection ends the server connection id (its statement and its session).
func KillConnection(id int64) string { return fmt.Sprintf("KILL %d", id) }

// KillQuery ends the statement connection id runs, keeping its session (spelled in dbconn, whose
// connections stop their own abandoned statements with it).
func KillQuery(id int64) string { return dbconn.KillQuery(id) }

// AutoIncLockMode reads innodb_autoinc_lock_mode (MySQL's say in whether inserts of an
// auto-increment table may run side by side).
const AutoIncLockMode = "SELECT @@innodb_autoinc_lock_mode"

// GaleraWriteSetLimits reads wsrep_max_ws_rows and wsrep_max_ws_size, a Galera node's limits on
// one transaction's write set.
const GaleraWriteSetLimits = "SELECT @@GLOBAL.wsrep_max_ws_rows, @@GLOBAL.wsrep_max_ws_size"
