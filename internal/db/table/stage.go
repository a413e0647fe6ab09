package table

// A staged chunk (copier) is read from the source into a session's temporary MyISAM table, and
// written from there into the target: the source is locked only while the rows are read and
// stored in the stage, not while InnoDB inserts them and logs them to the binlog. The stage is a
// temporary table, so its name cannot meet another session's table, and with a ROW binlog its
// rows are not logged.

// StageTable is the stage's name in the source's schema (temporary tables belong to one session).
const StageTable = "_enginemig_stage"

// Stage is the stage's qualified name.
func (s *SQL) Stage() string { return s.stage }

// StageCreate creates the stage: the copied columns with their types, no keys, MyISAM (it exists
// wherever the source does).
func (s *SQL) StageCreate() string {
	return "CREATE TEMPORARY TABLE " + s.stage + " ENGINE=MyISAM SELECT " + s.colList + " FROM " + s.src + " LIMIT 0"
}

// StageFill reads r's rows from the source into the stage.
func (s *SQL) StageFill(r Range) (string, []any) { return s.copyInto("INSERT INTO "+s.stage, r) }

// StageDrain writes the stage's rows into the target.
func (s *SQL) StageDrain(mode WriteMode) string {
	return s.verb(mode) + s.dst + " (" + s.colList + ") SELECT " + s.colList + " FROM " + s.stage
}

// StageClear empties the stage for the next chunk.
func (s *SQL) StageClear() string { return "TRUNCATE TABLE " + s.stage }

// StageDrop removes the stage.
func (s *SQL) StageDrop() string { return "DROP TEMPORARY TABLE IF EXISTS " + s.stage }
