package table

import (
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// GateName is the empty table a Galera swap-back renames along with the tables it swaps, so that
// the rename asks for the gate's metadata lock before any other (see cutover.Swap.Gate). GoneName
// is what the rename makes of it.
func GateName(name string) string { return "#" + name + "_gate" }

// GoneName is the gate's name after the swap-back's rename, dropped right after.
func GoneName(name string) string { return "#" + name + "_gone" }

// GateSortsFirst reports whether the gate's metadata lock comes before those of every table the
// rename takes: RENAME asks for its locks in the order of their keys (schema, then name, byte by
// byte, with the names as written or folded to lower case by lower_case_table_names). '#' sorts
// before '_' and every letter and digit; only a name starting with a space, '!', '"' or '#'
// (and then only some of them) breaks that.
func GateSortsFirst(name string) bool {
	gate := GateName(name)
	if len([]rune(gate)) > MaxNameLength || len([]rune(GoneName(name))) > MaxNameLength {
		return false
	}
	for _, other := range []string{name, ShadowName(name), OldName(name)} {
		for _, fold := range []func(string) string{func(s string) string { return s }, strings.ToLower} {
			if fold(gate)+"\x00" >= fold(other)+"\x00" {
				return false
			}
		}
	}
	return true
}

// CreateGate creates the gate: an empty InnoDB table marked by comment, which no write needs.
func CreateGate(schema, gate, comment string) string {
	return "CREATE TABLE IF NOT EXISTS " + dbconn.QualifiedName(schema, gate) + " (id INT PRIMARY KEY) ENGINE=InnoDB COMMENT=" + dbconn.QuoteString(comment)
}

// HoldGate opens a handler on the gate: an explicit shared metadata lock that a DDL in total order
// waits for instead of aborting the session that holds it. ReleaseGate closes it.
func HoldGate(schema, gate string) string {
	return "HANDLER " + dbconn.QualifiedName(schema, gate) + " OPEN AS enginemig_gate"
}

// ReleaseGate closes the handler HoldGate opened.
const ReleaseGate = "HANDLER enginemig_gate CLOSE"
