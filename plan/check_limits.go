package plan

import "fmt"

// InnoDB limits that MyISAM does not share.
const (
	maxInnoDBColumns     = 1017
	maxSecondaryIndexes  = 64
	maxKeyPartsMariaDB   = 32
	maxKeyPartsMySQL     = 16
	maxIndexBytesDynamic = 3072
	maxColumnPrefixSmall = 767 // COMPACT/REDUNDANT, or large prefixes off
)

func init() {
	registerTable("too-many-columns", Blocker, "more than 1017 columns (InnoDB's limit)", checkTooManyColumns)
	registerTable("too-many-indexes", Blocker, "more than 64 secondary indexes, or an index with more key parts than InnoDB allows (16 MySQL, 32 MariaDB)", checkTooManyIndexes)
}

func checkTooManyColumns(in *TableInput) []Finding {
	if in.Info == nil || len(in.Info.Columns) <= maxInnoDBColumns {
		return nil
	}
	return []Finding{newFinding("too-many-columns", Blocker,
		fmt.Sprintf("%d columns; InnoDB allows at most %d", len(in.Info.Columns), maxInnoDBColumns),
		"split the table (move rarely used columns to a side table keyed by the primary key); then plan again")}
}

func checkTooManyIndexes(in *TableInput) []Finding {
	if in.Info == nil {
		return nil
	}
	var out []Finding
	secondary := 0
	for _, ix := range in.Info.Indexes {
		if ix.Name != "PRIMARY" {
			secondary++
		}
	}
	if secondary > maxSecondaryIndexes {
		out = append(out, newFinding("too-many-indexes", Blocker,
			fmt.Sprintf("%d secondary indexes; InnoDB allows at most %d", secondary, maxSecondaryIndexes),
			"drop indexes that queries do not use (sys.schema_unused_indexes helps); then plan again"))
	}
	parts := maxKeyPartsMySQL
	if in.Server == nil || in.Server.MariaDB() {
		parts = maxKeyPartsMariaDB
	}
	for _, ix := range in.Info.Indexes {
		if len(ix.Columns) > parts {
			out = append(out, newFinding("too-many-indexes", Blocker,
				fmt.Sprintf("index %s has %d key parts; InnoDB allows at most %d", ix.Name, len(ix.Columns), parts),
				"shorten the index; then plan again"))
		}
	}
	return out
}
