package table

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Trigger is one trigger as the server stores it, with everything needed to create it again
// identically on another table: timing, event, order, body, DEFINER, and the sql_mode and
// character set context it was created in.
type Trigger struct {
	Name      string `json:"name"`
	Timing    string `json:"timing"` // BEFORE, AFTER
	Event     string `json:"event"`  // INSERT, UPDATE, DELETE
	Order     int    `json:"order"`  // ACTION_ORDER within (timing, event), from 1
	Body      []byte `json:"body"`   // ACTION_STATEMENT, in CharsetClient
	SQLMode   string `json:"sql_mode"`
	Definer   string `json:"definer"` // user@host
	Charset   string `json:"character_set_client"`
	Collation string `json:"collation_connection"`
}

// LoadTriggers reads the table's triggers in the order they fire (timing, event, ACTION_ORDER),
// leaving out enginemig's own capture triggers (IsCaptureTrigger), which are never carried.
// The body is converted by the server to the trigger's own client character set and read as bytes,
// so a body with non-ASCII literals is created again byte for byte.
func LoadTriggers(ctx context.Context, q Querier, schema, name string) ([]Trigger, error) {
	rows, err := q.QueryContext(ctx, `SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER,
		CAST(CONVERT(ACTION_STATEMENT USING utf8mb4) AS BINARY), SQL_MODE, DEFINER, CHARACTER_SET_CLIENT, COLLATION_CONNECTION
		FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?
		ORDER BY ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER`, schema, name)
	if err != nil {
		return nil, fmt.Errorf("read triggers of %s: %w", dbconn.QualifiedName(schema, name), err)
	}
	defer rows.Close()
	var out []Trigger
	for rows.Next() {
		var t Trigger
		var definer sql.NullString // NULL for an account without the TRIGGER privilege
		if err := rows.Scan(&t.Name, &t.Timing, &t.Event, &t.Order, &t.Body, &t.SQLMode, &definer, &t.Charset, &t.Collation); err != nil {
			return nil, err
		}
		t.Definer = definer.String
		if !IsCaptureTrigger(t.Name) {
			out = append(out, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for i := range out {
		if err := out[i].bodyInOwnCharset(ctx, q, schema); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bodyInOwnCharset re-reads the body converted to the trigger's client character set, the bytes
// a session with that character_set_client must send to create it again.
func (t *Trigger) bodyInOwnCharset(ctx context.Context, q Querier, schema string) error {
	if isUTF8(t.Charset) {
		return nil
	}
	for _, r := range t.Charset {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("trigger %s: unexpected character set %q", t.Name, t.Charset)
		}
	}
	return q.QueryRowContext(ctx, "SELECT CAST(CONVERT(ACTION_STATEMENT USING "+t.Charset+") AS BINARY) FROM information_schema.TRIGGERS "+
		"WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME = ?", schema, t.Name).Scan(&t.Body)
}

func isUTF8(cs string) bool {
	switch strings.ToLower(cs) {
	case "utf8", "utf8mb3", "utf8mb4":
		return true
	}
	return false
}

// Carryable says why the trigger cannot be created again faithfully, or "" when it can: the
// statement's names travel in UTF-8, so a trigger created in another client character set must
// have ASCII names.
func (t Trigger) Carryable(schema, table string) string {
	if isUTF8(t.Charset) {
		return ""
	}
	for _, s := range []string{schema, table, t.Name, t.Definer} {
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return fmt.Sprintf("trigger %s was created with character_set_client=%s and a name (%q) outside ASCII", t.Name, t.Charset, s)
			}
		}
	}
	return ""
}

// TriggerNames lists the triggers on schema.name, capture triggers and stand-ins included, by
// the lookup a stand-in's guard makes (CreateGuarded): a table's own, where a lookup by trigger
// name may open every table of the schema.
func TriggerNames(ctx context.Context, q Querier, schema, name string) ([]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?",
		schema, name)
	if err != nil {
		return nil, fmt.Errorf("list the triggers of %s: %w", dbconn.QualifiedName(schema, name), err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// TriggerExists reports whether the server has the trigger schema.name, found by its name as DROP
// TRIGGER finds it (SHOW CREATE TRIGGER), not from information_schema's listing.
func TriggerExists(ctx context.Context, q Querier, schema, name string) (bool, error) {
	rows, err := q.QueryContext(ctx, ShowCreateTrigger(schema, name))
	if dbconn.IsNoSuchTrigger(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up trigger %s: %w", name, err)
	}
	defer rows.Close()
	return rows.Next(), rows.Err()
}

// TempTriggerName is the name a trigger carries on the new table between the swap and the moment
// it gets its own name back: unique per schema (a hash of schema, table and name) and short.
func TempTriggerName(schema, table, name string) string {
	sum := sha1.Sum([]byte(schema + "\x00" + table + "\x00" + name))
	return "_emtrg_" + hex.EncodeToString(sum[:])[:16]
}

// Same reports whether two trigger sets are the same definitions (names, timing, event, order,
// body, definer and context): what apply checks under the cut-over lock.
func SameTriggers(a, b []Trigger) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Timing != y.Timing || x.Event != y.Event || x.Order != y.Order || string(x.Body) != string(y.Body) ||
			x.SQLMode != y.SQLMode || x.Definer != y.Definer || x.Charset != y.Charset || x.Collation != y.Collation {
			return false
		}
	}
	return true
}

// definerClause spells DEFINER=`user`@`host` (the user part may itself contain '@').
func (t Trigger) definerClause() string {
	i := strings.LastIndex(t.Definer, "@")
	if i < 0 {
		return "DEFINER=" + dbconn.QuoteIdent(t.Definer)
	}
	return "DEFINER=" + dbconn.QuoteIdent(t.Definer[:i]) + "@" + dbconn.QuoteIdent(t.Definer[i+1:])
}

// Create is the statement that creates the trigger, named name, on schema.table. precedes, when
// set, places it just before that trigger of the same timing and event.
func (t Trigger) Create(schema, table, name, precedes string) string {
	return t.create(schema, table, name, precedes, string(t.Body))
}

func (t Trigger) create(schema, table, name, precedes, body string) string {
	var b strings.Builder
	b.WriteString("CREATE " + t.definerClause() + " TRIGGER " + dbconn.QualifiedName(schema, name) + " " + t.Timing + " " + t.Event +
		" ON " + dbconn.QualifiedName(schema, table) + " FOR EACH ROW ")
	if precedes != "" {
		b.WriteString("PRECEDES " + dbconn.QuoteIdent(precedes) + " ")
	}
	b.WriteString(body)
	return b.String()
}

// CreateGuarded creates the trigger under its temporary name on schema.onTable, with its body
// wrapped in a guard: it fires only while no trigger of the real name sits on live, the table the
// application writes. Before the swap the real trigger is on live, so the stand-in on the shadow
// stays silent (enginemig's own writes fire nothing); from the swap on the real one is on the
// table that left, so the stand-in speaks for it; the instant the real one is created on live, the
// stand-in falls silent again. At every moment exactly one of the two fires. The guard reads
// information_schema, a query per row, and is in place only from the swap to the end of the
// trigger step (milliseconds).
func (t Trigger) CreateGuarded(schema, onTable, live string) string {
	realOnLive := "(SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = " + hexLiteral(schema) +
		" AND EVENT_OBJECT_TABLE = " + hexLiteral(live) + " AND TRIGGER_NAME = " + hexLiteral(t.Name) + ")"
	// The body may end in a -- comment: the newline keeps the guard's END IF out of it. The session
	// variable comes first (AND stops at the first false): enginemig's own writers set it, so their
	// rows skip the costly lookup (docs/how-it-works/triggers.md) and fire nothing.
	body := "IF " + OwnWriteVar + " IS NULL AND " + realOnLive + " = 0 THEN\n" + string(t.Body) + "\n; END IF"
	return t.create(schema, onTable, TempTriggerName(schema, live, t.Name), "", body)
}

// OwnWriteVar is the user variable set in enginemig's own writing sessions (copy and replay, see
// dbconn.OpenRowWriter): a stand-in never fires for them.
const OwnWriteVar = dbconn.OwnWriteVar

// hexLiteral spells a string as a utf8mb4 hex literal, which reads the same whatever the
// trigger's client character set.
func hexLiteral(s string) string {
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "'"
}

// Session is what a trigger must be created in so that it records the same context as the
// original: its sql_mode, client character set and connection collation.
func (t Trigger) Session() []string {
	return []string{"SET SESSION sql_mode = " + dbconn.QuoteString(t.SQLMode),
		"SET SESSION character_set_client = " + dbconn.QuoteString(t.Charset),
		"SET SESSION collation_connection = " + dbconn.QuoteString(t.Collation)}
}

// FromStandIn recovers a trigger's own definition from its stand-in (what CreateGuarded made):
// the real name from the guard, the body from inside it; timing, event, DEFINER and context are
// the stand-in's own, created in the original's session. ok is false for any other trigger.
func FromStandIn(s Trigger) (Trigger, bool) {
	body := string(s.Body)
	// The server keeps the guard's text but drops the literals' _utf8mb4 introducer.
	const nameAt, then, end = "AND TRIGGER_NAME =", ") = 0 THEN\n", "\n; END IF"
	const head = "IF " + OwnWriteVar + " IS NULL AND (SELECT COUNT(*) FROM information_schema.TRIGGERS"
	i := strings.Index(body, nameAt)
	j := strings.Index(body, then)
	if !strings.HasPrefix(s.Name, "_emtrg_") || !strings.HasPrefix(body, head) ||
		i < 0 || j < i || !strings.HasSuffix(body, end) {
		return Trigger{}, false
	}
	lit := body[i+len(nameAt) : j]
	k := strings.Index(lit, "X'")
	if k < 0 || !strings.HasSuffix(lit, "'") {
		return Trigger{}, false
	}
	name, err := hex.DecodeString(lit[k+2 : len(lit)-1])
	if err != nil {
		return Trigger{}, false
	}
	t := s
	t.Name = string(name)
	t.Body = []byte(body[j+len(then) : len(body)-len(end)])
	return t, true
}

// tableWords are the words of a statement that reads or writes a table, or calls a routine that
// may: a body without any of them (SET NEW.x = ..., IF ... THEN SIGNAL ...) touches no table. A
// stored function called in an expression is not seen.
var tableWords = regexp.MustCompile(`(?i)\b(INSERT|UPDATE|DELETE|REPLACE|SELECT|CALL|FROM|INTO)\b`)

// TouchesTables reports whether the trigger's body may read or write a table (or call a
// procedure that may): the server then locks those tables with every lock of the trigger's table.
func (t Trigger) TouchesTables() bool { return tableWords.Match(t.Body) }
