package plan

import (
	"context"
	"fmt"
	"strings"
)

// How apply captures the table's changes while it copies (apply --capture).
const (
	CaptureAuto     = "auto"     // binlog where the server's binlog allows it, triggers otherwise
	CaptureBinlog   = "binlog"   // read row events from the binlog as a replica
	CaptureTriggers = "triggers" // note changed keys with triggers (any binlog setting, or none)
)

// CaptureCostPerWrite is what trigger capture adds to each application write on the table while
// its triggers exist: one MyISAM insert of the key into the change log per changed row (two for
// an UPDATE that changes the key). Figures: docs/how-it-works.md, "Capture without a ROW binlog:
// triggers and a change log".
const CaptureCostPerWrite = "about 40 µs"

// ChooseCapture decides how apply captures changes on this server, and why: want is auto, binlog
// or triggers ("" means auto). It fails when the wanted capture cannot work here.
func ChooseCapture(s *ServerInfo, want string) (mode, why string, err error) {
	problems := binlogProblems(s)
	gtid := strings.ToUpper(s.Var("enforce_gtid_consistency"))
	gtidForbids := gtid == "ON" || gtid == "1"
	const gtidWhy = "enforce_gtid_consistency=ON: a capture trigger on the converted InnoDB table (for a rollback) would make every application write touch InnoDB and MyISAM in one statement, which fails with error 1785"
	switch want {
	case CaptureBinlog:
		if len(problems) > 0 {
			return "", "", fmt.Errorf("--capture binlog needs the binlog in ROW format with full row images, but %s", strings.Join(problems, ", "))
		}
		return CaptureBinlog, "asked for with --capture binlog", nil
	case CaptureTriggers:
		if gtidForbids {
			return "", "", fmt.Errorf("--capture triggers cannot be used with %s", gtidWhy)
		}
		return CaptureTriggers, "asked for with --capture triggers", nil
	case "", CaptureAuto:
		if len(problems) == 0 {
			return CaptureBinlog, "the binlog is on, in ROW format with full row images", nil
		}
		if gtidForbids {
			return "", "", fmt.Errorf("the binlog cannot be used (%s) and triggers cannot either: %s", strings.Join(problems, ", "), gtidWhy)
		}
		return CaptureTriggers, strings.Join(problems, ", "), nil
	}
	return "", "", fmt.Errorf("unknown capture %q: use auto, binlog or triggers", want)
}

// captureVariables are what ChooseCapture reads.
var captureVariables = []string{"version", "log_bin", "binlog_format", "binlog_row_image", "enforce_gtid_consistency"}

// CaptureFor reads only the variables ChooseCapture needs and decides (apply's and rollback's
// preflight, which run the full server checks afterwards: LoadServer reads grants and statement
// digests, too much to do twice).
func CaptureFor(ctx context.Context, q Querier, want string) (version, mode, why string, err error) {
	s := &ServerInfo{Variables: map[string]string{}}
	if err := readNameValues(ctx, q, "SHOW GLOBAL VARIABLES WHERE Variable_name IN "+inList(captureVariables), func(k, v string) {
		s.Variables[strings.ToLower(k)] = v
	}); err != nil {
		return "", "", "", fmt.Errorf("read server variables: %w", err)
	}
	mode, why, err = ChooseCapture(s, want)
	return s.Variables["version"], mode, why, err
}

// binlogProblems lists why binlog capture cannot work on this server (none: it can).
func binlogProblems(s *ServerInfo) []string {
	var problems []string
	if !s.VarOn("log_bin") {
		return append(problems, "log_bin is OFF")
	}
	if f := s.Var("binlog_format"); !strings.EqualFold(f, "ROW") {
		problems = append(problems, "binlog_format="+f+" (need ROW)")
	}
	if img := s.Var("binlog_row_image"); img != "" && !strings.EqualFold(img, "FULL") {
		problems = append(problems, "binlog_row_image="+img+" (need FULL)")
	}
	return problems
}

// capturesWithTriggers says apply will capture with triggers on this server.
func (s *ServerInfo) capturesWithTriggers() bool {
	mode, _, err := ChooseCapture(s, s.WantCapture)
	return err == nil && mode == CaptureTriggers
}
