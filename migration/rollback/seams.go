package rollback

import "github.com/enginemig/enginemig/shadow"

// Seams are a rollback's test seams; the zero value (and a nil *Seams) is none.
type Seams struct {
	// Shadow are the capture's (replay held back, ...).
	Shadow shadow.Seams
	// CrashAtTrigger stops the trigger step with shadow.ErrSimulatedCrash right after creating
	// real trigger n (from 1), as if the process had died there.
	CrashAtTrigger int
}

func (s *Seams) get() Seams {
	if s == nil {
		return Seams{}
	}
	return *s
}
