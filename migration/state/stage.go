package state

// Stage is where a migration is: recorded in the state table, shown by progress and status, and
// (through the runner's hook points) the vocabulary of hooks and gates.
type Stage string

func (s Stage) String() string { return string(s) }

// The stages, in the order a migration passes them; the last four are outcomes.
const (
	StagePreflight Stage = "preflight"
	StageCopy      Stage = "copy"
	StageIndexes   Stage = "indexes"
	StagePostponed Stage = "postponed"
	StageVerify    Stage = "verify"
	StageCutover   Stage = "cutover"
	// StageTriggers: the swap is done; the table's triggers get their own names on it again.
	StageTriggers Stage = "triggers"
	StageDone     Stage = "done"
	StageDryRun   Stage = "dry-run-done"
	StageFailed   Stage = "failed"
	// StageRolledBack marks a migration whose conversion was undone.
	StageRolledBack Stage = "rolled-back"
)

// InProgress are the stages of a migration that has not finished; finding one while nobody holds
// the table's lock means its process died.
func (s Stage) InProgress() bool {
	switch s {
	case StagePreflight, StageCopy, StageIndexes, StageVerify, StagePostponed, StageCutover, StageTriggers:
		return true
	}
	return false
}
