package workload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Log formats ParseLog reads.
const (
	SlowLog    = "slow log"
	GeneralLog = "general log"
)

// ErrNotALog means the file is neither a slow query log nor a general query log.
var ErrNotALog = errors.New("not a MySQL/MariaDB slow query log or general query log")

var (
	slowStatsRe  = regexp.MustCompile(`^# Query_time: ([0-9.]+)\s+Lock_time: ([0-9.]+)\s+Rows_sent: (\d+)\s+Rows_examined: (\d+)`)
	slowSchemaRe = regexp.MustCompile(`^# Thread_id: \d+\s+Schema: (\S*)`)
	// general log lines: optional time (MariaDB "241201  2:40:00", MySQL ISO), thread id, command, argument.
	generalRe = regexp.MustCompile(`^(?:\d{6}\s+\d{1,2}:\d\d:\d\d|\d{4}-\d\d-\d\dT[0-9:.]+Z?)?\s+(\d+) (Query|Execute|Init DB|Connect|Quit|Prepare|Close stmt|Field List|Statistics|Ping|Reset stmt|Change user|Set option|Refresh|Shutdown|Processlist|Kill|Binlog Dump|Register Slave|Daemon|Sleep)\t?(.*)$`)
	useRe     = regexp.MustCompile("(?i)^use\\s+`?([^`;]+)`?;?$")
	connectRe = regexp.MustCompile(`\S+ on (\S*)`)
)

// ReadLogFile parses a slow query log (best written with long_query_time=0, which logs every
// statement) or a general query log, whichever the file is.
func ReadLogFile(path string) ([]Statement, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("read log %s: %w", path, err)
	}
	defer f.Close()
	stmts, format, err := ParseLog(f)
	if err != nil {
		return nil, "", fmt.Errorf("read log %s: %w", path, err)
	}
	return stmts, format, nil
}

// logEntry is one statement read from a log, before grouping by shape.
type logEntry struct {
	schema, sql    string
	seconds, lock  float64
	examined, sent int64
	timed          bool
}

// ParseLog reads a slow or general query log and groups its statements by normalised text.
func ParseLog(r io.Reader) ([]Statement, string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	var entries []logEntry
	format := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "# Query_time:") {
			format = SlowLog
			break
		}
		if generalRe.MatchString(l) {
			format = GeneralLog
			break
		}
	}
	switch format {
	case SlowLog:
		entries = parseSlow(lines)
	case GeneralLog:
		entries = parseGeneral(lines)
	default:
		return nil, "", fmt.Errorf("%w: found no \"# Query_time:\" header nor general-log command line", ErrNotALog)
	}
	return group(entries), format, nil
}

// entries collects a log's statements: each starts with its header and takes the lines after it.
type entries struct {
	out  []logEntry
	cur  *logEntry
	body []string
}

// flush ends the current statement, keeping it if it has text.
func (e *entries) flush() {
	if e.cur != nil {
		if q := statementText(e.body); q != "" {
			e.cur.sql = q
			e.out = append(e.out, *e.cur)
		}
	}
	e.cur, e.body = nil, nil
}

func parseSlow(lines []string) []logEntry {
	var e entries
	schema := ""
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# Time:"), strings.HasPrefix(l, "# User@Host:"):
			e.flush()
		case slowSchemaRe.MatchString(l):
			e.flush()
			schema = slowSchemaRe.FindStringSubmatch(l)[1]
		case slowStatsRe.MatchString(l):
			e.flush()
			m := slowStatsRe.FindStringSubmatch(l)
			e.cur = &logEntry{schema: schema, timed: true}
			e.cur.seconds, _ = strconv.ParseFloat(m[1], 64)
			e.cur.lock, _ = strconv.ParseFloat(m[2], 64)
			e.cur.sent, _ = strconv.ParseInt(m[3], 10, 64)
			e.cur.examined, _ = strconv.ParseInt(m[4], 10, 64)
		case strings.HasPrefix(l, "#"):
			// other header lines (Rows_affected, Full_scan, administrator command, ...)
		case e.cur != nil:
			if m := useRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil && len(e.body) == 0 {
				schema, e.cur.schema = m[1], m[1]
				continue
			}
			if strings.HasPrefix(l, "SET timestamp=") && len(e.body) == 0 {
				continue
			}
			e.body = append(e.body, l)
		}
	}
	e.flush()
	return e.out
}

// statementText joins a statement's lines and drops its final ";".
func statementText(body []string) string {
	q := strings.TrimSpace(strings.Join(body, "\n"))
	return strings.TrimSpace(strings.TrimSuffix(q, ";"))
}

func parseGeneral(lines []string) []logEntry {
	var e entries
	schemas := map[string]string{} // per connection id
	for _, l := range lines {
		m := generalRe.FindStringSubmatch(l)
		if m == nil {
			if e.cur != nil {
				e.body = append(e.body, l) // a statement's further lines
			}
			continue
		}
		e.flush()
		id, cmd, arg := m[1], m[2], m[3]
		switch cmd {
		case "Init DB":
			schemas[id] = strings.TrimSpace(arg)
		case "Connect":
			if c := connectRe.FindStringSubmatch(arg); c != nil {
				schemas[id] = c[1]
			}
		case "Query", "Execute": // Prepare is not counted: its Execute lines are the runs
			if u := useRe.FindStringSubmatch(strings.TrimSpace(arg)); u != nil {
				schemas[id] = u[1]
				continue
			}
			e.cur = &logEntry{schema: schemas[id], examined: -1, sent: -1}
			e.body = []string{arg}
		}
	}
	e.flush()
	return e.out
}

// group sums entries of the same normalised text and default database, keeping their distinct
// literal statements as examples (the first is Example).
func group(entries []logEntry) []Statement {
	idx := map[string]int{}
	var out []Statement
	for _, e := range entries {
		text, _, _ := Normalize(e.sql)
		k := e.schema + "\x00" + text
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			st := Statement{Schema: e.schema, Text: text}
			if !e.timed {
				st.RowsExamined, st.RowsSent = -1, -1
			}
			out = append(out, st)
		}
		s := &out[i]
		s.addExample(e.sql)
		s.Count++
		if e.timed {
			s.Seconds += e.seconds
			s.LockSeconds += e.lock
			s.RowsExamined += e.examined
			s.RowsSent += e.sent
		}
	}
	return out
}
