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

// CaptureCostPerWrite is what trigger capture adds to each application write on the table while its
// triggers exist: one MyISAM insert of the key into the change log per changed row (two for an
// UPDATE that changes the key). Figures: docs/bench/constants.md, "Behind the design pages' choices"
// (Capture).
const CaptureCostPerWrite = "about 40 µs"

// ChooseCapture decides how apply captures changes on this server with this account, and why:
// want is auto, binlog or triggers ("" means auto). Auto takes the binlog where it is usable and
// the account may read it, else triggers where the account can create them. It fails with a
// *CaptureRefusal, naming every route, when the wanted capture cannot work. Without the account's
// grants (s.Grants nil) the account is taken to have what each capture needs.
func ChooseCapture(s *ServerInfo, want string) (mode, why string, err error) {
	problems := binlogProblems(s)
	gtid := strings.ToUpper(s.Var("enforce_gtid_consistency"))
	gtidForbids := gtid == "ON" || gtid == "1"
	const gtidWhy = "enforce_gtid_consistency=ON: a capture trigger on the converted InnoDB table (for a rollback) would make every application write touch InnoDB and MyISAM in one statement, which fails with error 1785"
	readable, creatable := binlogReadable(s), triggersCreatable(s)
	refuse := func(format string, args ...any) (string, string, error) {
		return "", "", &CaptureRefusal{Why: fmt.Sprintf(format, args...), Remedies: captureRoutes(s, problems, gtidForbids)}
	}
	switch want {
	case CaptureBinlog:
		if len(problems) > 0 {
			return refuse("--capture binlog needs the binlog in ROW format with full row images, but %s", strings.Join(problems, ", "))
		}
		if readable != "" {
			return refuse("--capture binlog reads the binlog as a replica, but %s", readable)
		}
		return CaptureBinlog, "asked for with --capture binlog", nil
	case CaptureTriggers:
		if gtidForbids {
			return refuse("--capture triggers cannot be used with %s", gtidWhy)
		}
		if creatable != "" {
			return refuse("--capture triggers cannot create its triggers: %s", creatable)
		}
		return CaptureTriggers, "asked for with --capture triggers", nil
	case "", CaptureAuto:
		if len(problems) == 0 && readable == "" {
			return CaptureBinlog, "the binlog is on, in ROW format with full row images", nil
		}
		whyNot := strings.Join(problems, ", ")
		if len(problems) == 0 {
			whyNot = readable
		}
		switch {
		case gtidForbids:
			return refuse("the binlog cannot be used (%s) and triggers cannot either: %s", whyNot, gtidWhy)
		case creatable != "":
			return refuse("the binlog cannot be used (%s) and triggers cannot be created (%s)", whyNot, creatable)
		}
		return CaptureTriggers, whyNot, nil
	}
	return "", "", fmt.Errorf("unknown capture %q: use auto, binlog or triggers", want)
}

// CaptureRefusal is a capture that cannot work here, with every route to one that can.
type CaptureRefusal struct {
	Why      string
	Remedies []string
}

func (r *CaptureRefusal) Error() string { return r.Why }

// Remedy is the routes as one sentence.
func (r *CaptureRefusal) Remedy() string { return strings.Join(r.Remedies, "; or ") }

// binlogReadable says why the account may not read the binlog as a replica ("" if it may, or its
// grants are unknown): REPLICATION SLAVE for the stream, REPLICATION CLIENT (BINLOG MONITOR on
// MariaDB 10.5+) for the binlog's position. A hosted account never has them.
func binlogReadable(s *ServerInfo) string {
	if s.Grants == nil {
		return ""
	}
	var missing []string
	for _, p := range globalPrivileges {
		if !s.Grants.Has(p, "", "") {
			missing = append(missing, s.privilegeName(p))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "the account lacks " + strings.Join(missing, ", ")
}

// privilegeName is p as this server calls it.
func (s *ServerInfo) privilegeName(p string) string {
	if p == "REPLICATION CLIENT" && s.MariaDB() && s.AtLeast(10, 5, 2) {
		return "BINLOG MONITOR"
	}
	return p
}

// triggersCreatable says why the account cannot create triggers on this server ("" if it can, or
// its grants are unknown): with the binlog on, the server refuses a trigger from an account
// without SUPER (error 1419) unless log_bin_trust_function_creators is on. The TRIGGER privilege
// on the table is the privileges check's.
func triggersCreatable(s *ServerInfo) string {
	if s.Grants == nil || !s.VarOn("log_bin") || s.VarOn("log_bin_trust_function_creators") || s.Grants.Has("SUPER", "", "") {
		return ""
	}
	return "the binlog is on, and the account lacks SUPER with log_bin_trust_function_creators=OFF (error 1419)"
}

// captureRoutes are the ways to a capture that works, each with who can take it.
func captureRoutes(s *ServerInfo, problems []string, gtidForbids bool) []string {
	var routes []string
	if len(problems) > 0 {
		routes = append(routes, "for binlog capture turn on the binlog in ROW format with full row images (log_bin needs a restart; "+
			"binlog_format=ROW, binlog_row_image=FULL; on a managed server in its parameter group or flags) and reconnect the application")
	} else if why := binlogReadable(s); why != "" {
		routes = append(routes, fmt.Sprintf("for binlog capture GRANT %s ON *.* TO <enginemig account> (a managed server's admin account "+
			"can grant these; a shared host's database-only account cannot)", strings.TrimPrefix(why, "the account lacks ")))
	}
	switch {
	case gtidForbids:
		routes = append(routes, "for trigger capture turn enforce_gtid_consistency off")
	case triggersCreatable(s) != "":
		routes = append(routes, "for trigger capture SET GLOBAL log_bin_trust_function_creators = 1 (on a managed server: the parameter "+
			"group, database flag or server parameter of that name; it lets accounts without SUPER create triggers while the binlog is on), "+
			"or give the account SUPER, or turn the binlog off where nothing (replicas, backups) needs it")
	}
	return routes
}

// captureVariables are what ChooseCapture reads.
var captureVariables = []string{"version", "log_bin", "binlog_format", "binlog_row_image", "enforce_gtid_consistency", "log_bin_trust_function_creators"}

// CaptureFor reads only what ChooseCapture needs (the variables and the account's grants) and
// decides (apply's and rollback's preflight, which run the full server checks afterwards:
// LoadServer reads statement digests too, too much to do twice).
func CaptureFor(ctx context.Context, q Querier, want string) (version, mode, why string, err error) {
	s := &ServerInfo{Variables: map[string]string{}}
	if err := readNameValues(ctx, q, "SHOW GLOBAL VARIABLES WHERE Variable_name IN "+inList(captureVariables), func(k, v string) {
		s.Variables[strings.ToLower(k)] = v
	}); err != nil {
		return "", "", "", fmt.Errorf("read server variables: %w", err)
	}
	s.setVersion(s.Variables["version"])
	s.Grants, _ = loadGrants(ctx, q)
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
