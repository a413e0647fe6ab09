package plan

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Severity says what a finding means for apply.
type Severity string

const (
	// Blocker: apply refuses the table until it is fixed.
	Blocker Severity = "blocker"
	// Warning: apply proceeds, but the DBA must read it (behaviour changes or a risk).
	Warning Severity = "warning"
	// Info: something worth knowing; nothing to fix.
	Info Severity = "info"
)

// rank orders severities, worst first.
func (s Severity) rank() int {
	switch s {
	case Blocker:
		return 0
	case Warning:
		return 1
	default:
		return 2
	}
}

// Valid reports whether s is one of the three severities (the plan-file reader uses it).
func (s Severity) Valid() bool { return s == Blocker || s == Warning || s == Info }

// UnmarshalJSON rejects unknown severities so that a hand-edited plan file cannot downgrade a
// blocker to something apply does not recognise.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if !Severity(v).Valid() {
		return fmt.Errorf("unknown severity %q (want blocker, warning or info)", v)
	}
	*s = Severity(v)
	return nil
}

// Finding is one result of one check.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Remedy   string   `json:"remedy,omitempty"`
	// Schema is set on findings that concern a whole database (e.g. transactions seen in its
	// sessions) when they are reported at plan level.
	Schema string `json:"schema,omitempty"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s [%s] %s", f.Severity, f.Check, f.Message)
}

// Blockers returns the findings that make apply refuse.
func Blockers(findings []Finding) []Finding {
	var out []Finding
	for _, f := range findings {
		if f.Severity == Blocker {
			out = append(out, f)
		}
	}
	return out
}

// Counts tallies findings by severity.
type Counts struct {
	Blockers int `json:"blockers"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

func (c *Counts) add(fs []Finding) {
	for _, f := range fs {
		switch f.Severity {
		case Blocker:
			c.Blockers++
		case Warning:
			c.Warnings++
		default:
			c.Infos++
		}
	}
}

// sortFindings puts blockers first, then by check id, so output and files are stable.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Severity.rank() != fs[j].Severity.rank() {
			return fs[i].Severity.rank() < fs[j].Severity.rank()
		}
		return fs[i].Check < fs[j].Check
	})
}
