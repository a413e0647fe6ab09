package table

import (
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// RowIDColumn is the primary key apply gives the InnoDB copy of a table without a unique key: an
// invisible BIGINT UNSIGNED AUTO_INCREMENT column. InnoDB then clusters on it instead of a hidden
// row id drawn from one server-wide counter, ROW replicas find a changed row by it instead of a
// full scan, and Galera can replicate deletes. INVISIBLE keeps it out of SELECT * and out of an
// INSERT without a column list, so the application sees the table it had. The name (enginemig's
// prefix) is how rollback and a later run tell it from the table's own columns: it is never
// copied or replayed, and its index never addresses rows.
const RowIDColumn = "_enginemig_rowid"

// IsRowID reports the column apply added (RowIDColumn, invisible and AUTO_INCREMENT, as apply
// creates it), so a table's own column of that name, however unlikely, is never mistaken for it.
func (c Column) IsRowID() bool {
	x := strings.ToUpper(c.Extra)
	return strings.EqualFold(c.Name, RowIDColumn) && strings.Contains(x, "INVISIBLE") && strings.Contains(x, "AUTO_INCREMENT")
}

// RowIDSupported reports a server with INVISIBLE columns: MariaDB 10.3.3 and MySQL 8.0.23 on.
func RowIDSupported(version string) bool {
	v := strings.SplitN(version, "-", 2)[0]
	parts := strings.Split(v, ".")
	num := func(i int) int {
		if i >= len(parts) {
			return 0
		}
		n, _ := strconv.Atoi(parts[i])
		return n
	}
	min := [3]int{8, 0, 23}
	if dbconn.MariaDB(version) {
		min = [3]int{10, 3, 3}
	}
	for i := range min {
		if num(i) != min[i] {
			return num(i) > min[i]
		}
	}
	return true
}

// CanAddRowID reports a keyless table whose InnoDB copy can get RowIDColumn: it has no
// AUTO_INCREMENT column of its own (a table has at most one) and no column of that name.
func (t *Info) CanAddRowID() bool {
	if !t.Keyless() {
		return false
	}
	if _, ok := t.AutoIncrementColumn(); ok {
		return false
	}
	_, clash := t.Column(RowIDColumn)
	return !clash
}

// rowIDDefinitions are the shadow's lines for RowIDColumn.
func rowIDDefinitions() []string {
	q := dbconn.QuoteIdent(RowIDColumn)
	return []string{q + " bigint(20) unsigned NOT NULL AUTO_INCREMENT INVISIBLE", "PRIMARY KEY (" + q + ")"}
}
