package plan

import (
	"fmt"

	"github.com/enginemig/enginemig/internal/db/table"
)

// ParallelCopy reports whether InnoDB lets apply copy two chunks of info at once (while nobody
// waits for the table, copier/parallel.go), and when it does not, why. apply's worker count
// (migration.copyWorkers) and plan's copy estimate both follow it.
//
// Into a table with an AUTO_INCREMENT column, InnoDB runs INSERT ... SELECT statements one after
// another whatever their key ranges: on MariaDB whatever innodb_autoinc_lock_mode says (each
// insert latches the index root, where the counter is kept), on MySQL unless the mode is 2 (below
// it, a table-level AUTO-INC lock lasts to the end of each statement). The figures per server are
// in docs/bench/constants.md.
func ParallelCopy(mariaDB bool, autoincLockMode int64, info *table.Info) (bool, string) {
	c, ok := info.AutoIncrementColumn()
	switch {
	case !ok || (!mariaDB && autoincLockMode == 2):
		return true, ""
	case mariaDB:
		return false, fmt.Sprintf("InnoDB writes chunks into a table with an AUTO_INCREMENT column (%s) one after another on MariaDB", c.Name)
	}
	return false, fmt.Sprintf("InnoDB writes chunks into a table with an AUTO_INCREMENT column (%s) one after another while innodb_autoinc_lock_mode is %d (2 lets them run in parallel)", c.Name, autoincLockMode)
}
