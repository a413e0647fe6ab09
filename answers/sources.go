package answers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Where the application's statements come from: literal SQL, every distinct one the source keeps
// of each statement shape (up to workload.MaxExamples a shape): one shape's statements can answer
// differently (a FULLTEXT search whose word is a stopword on one engine only).

// ErrNoExamples: the server keeps the statements' shapes but no literal example of them.
var ErrNoExamples = errors.New("performance_schema keeps no literal example of the statements on the table")

// FromServer reads literal examples of the statements on schema.table from performance_schema
// (digests, with examples from events_statements_history_long), enginemig's own reads left out
// (workload.OwnRead).
//
// Where that history or the consumer feeding it is off (the servers' default:
// workload.ExamplesKept) there can be no example, so the digests are not read: apply asks this of
// every table of a whole-database run, and reading and parsing every digest was about 18 ms of
// each table's preflight on a busy wiki.
func FromServer(ctx context.Context, q dbconn.Querier, schema, table string) ([]string, error) {
	if err := workload.CheckDigests(ctx, q); err != nil {
		return nil, err
	}
	on, err := workload.ExamplesKept(ctx, q)
	if err != nil {
		return nil, err
	}
	if !on {
		return nil, fmt.Errorf("%w: events_statements_current or events_statements_history_long is off; turn them on (%s), let the application run, and check again, or give --statements FILE or --from-log FILE", ErrNoExamples, workload.EnableExamples)
	}
	c, err := workload.FromDigests(ctx, q, schema, table, 0)
	if err != nil {
		return nil, err
	}
	kept := c.Statements[:0]
	for _, st := range c.Statements {
		if !workload.OwnRead(st.Text) {
			kept = append(kept, st)
		}
	}
	c.Statements = kept
	return examples(c, true)
}

// FromLog reads literal statements on schema.table from a slow or general query log.
func FromLog(path, schema, table string) ([]string, error) {
	c, err := workload.FromLog(path, schema, table)
	if err != nil {
		return nil, err
	}
	return examples(c, false)
}

func examples(c *workload.Capture, server bool) ([]string, error) {
	var out []string
	for _, st := range c.Statements {
		out = append(out, st.Examples...)
	}
	if len(out) == 0 && server {
		return nil, fmt.Errorf("%w: %d statement shape(s) on the table seen, none of them in it; let the application run, and check again, or give --statements FILE or --from-log FILE", ErrNoExamples, len(c.Statements))
	}
	return out, nil
}

// FromFile reads statements from a file: each ends with a semicolon at the end of a line (it may
// span lines), or, in a file without such semicolons, each is one line; lines starting with --
// or # are comments.
func FromFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	perLine := !strings.Contains(strings.ReplaceAll(string(b), " ", ""), ";\n") && !strings.HasSuffix(strings.TrimSpace(string(b)), ";")
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "--") || strings.HasPrefix(line, "#") {
			flush()
			continue
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(strings.TrimSuffix(line, ";"))
		if perLine || strings.HasSuffix(line, ";") {
			flush()
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no statement", path)
	}
	return out, nil
}

// ReadAccepted reads a file of accepted statement digests (as the check prints them), one per
// line; anything after the digest on its line (the statement, a comment) is ignored.
func ReadAccepted(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f[0]) != 16 || strings.Trim(f[0], "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%s: %q is not a statement digest (16 hex digits, as `enginemig answers` prints them)", path, f[0])
		}
		out[f[0]] = true
	}
	return out, nil
}
