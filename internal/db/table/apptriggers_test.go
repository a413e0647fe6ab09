package table

import (
	"strings"
	"testing"
)

func TestTriggerStatements(t *testing.T) {
	tr := Trigger{Name: "t_ai", Timing: "AFTER", Event: "INSERT", Body: []byte("INSERT INTO a VALUES (NEW.id) -- audit"),
		Definer: "app@x@%", Charset: "utf8mb4", Collation: "utf8mb4_general_ci", SQLMode: "STRICT_TRANS_TABLES"}
	if got, want := tr.Create("db", "t", "t_ai", "_emtrg_1"), "CREATE DEFINER=`app@x`@`%` TRIGGER `db`.`t_ai` AFTER INSERT ON `db`.`t` FOR EACH ROW PRECEDES `_emtrg_1` INSERT INTO a VALUES (NEW.id) -- audit"; got != want {
		t.Errorf("create:\n got %s\nwant %s", got, want)
	}
	tmp := TempTriggerName("db", "t", "t_ai")
	if tmp != TempTriggerName("db", "t", "t_ai") || tmp == TempTriggerName("db", "t", "t_bi") || len(tmp) > 64 || !strings.HasPrefix(tmp, "_emtrg_") {
		t.Errorf("temporary name %q: must be stable, distinct per trigger and short", tmp)
	}
	g := tr.CreateGuarded("db", "_t_new", "t")
	for _, want := range []string{
		"TRIGGER `db`.`" + tmp + "` AFTER INSERT ON `db`.`_t_new` FOR EACH ROW IF @enginemig_own_write IS NULL AND (SELECT COUNT(*) FROM information_schema.TRIGGERS",
		"EVENT_OBJECT_SCHEMA = _utf8mb4 X'6462' AND EVENT_OBJECT_TABLE = _utf8mb4 X'74' AND TRIGGER_NAME = _utf8mb4 X'745f6169') = 0 THEN\n",
		"-- audit\n; END IF", // a trailing comment cannot swallow the END IF
	} {
		if !strings.Contains(g, want) {
			t.Errorf("guarded statement lacks %q:\n%s", want, g)
		}
	}
	if tr.Carryable("db", "t") != "" {
		t.Error("a utf8mb4 trigger is carryable")
	}
	latin := tr
	latin.Charset, latin.Name = "latin1", "tr\u00e9"
	if latin.Carryable("db", "t") == "" {
		t.Error("a latin1 trigger with a non-ASCII name cannot be created again byte for byte")
	}
	other := tr
	other.Body = []byte("INSERT INTO b VALUES (1)")
	if SameTriggers([]Trigger{tr}, []Trigger{other}) || !SameTriggers([]Trigger{tr}, []Trigger{tr}) {
		t.Error("SameTriggers must compare bodies")
	}
}

func TestTriggerFromStandIn(t *testing.T) {
	tr := Trigger{Name: "t_bi", Timing: "BEFORE", Event: "INSERT", Body: []byte("BEGIN\n  SET NEW.w = 'x; END IF';\nEND"),
		Definer: "root@localhost", Charset: "utf8mb4", Collation: "utf8mb4_general_ci", SQLMode: "ANSI"}
	stmt := tr.CreateGuarded("db", "_t_old", "t")
	standIn := tr
	standIn.Name = TempTriggerName("db", "t", "t_bi")
	standIn.Body = []byte(stmt[strings.Index(stmt, "FOR EACH ROW ")+len("FOR EACH ROW "):])
	got, ok := FromStandIn(standIn)
	if !ok || !SameTriggers([]Trigger{got}, []Trigger{tr}) {
		t.Fatalf("recovered %+v (%v), want %+v", got, ok, tr)
	}
	// MariaDB 10.11 stores the guard without the literals' _utf8mb4 introducer.
	standIn.Body = []byte(strings.ReplaceAll(string(standIn.Body), "_utf8mb4 ", ""))
	if got, ok = FromStandIn(standIn); !ok || got.Name != "t_bi" || string(got.Body) != string(tr.Body) {
		t.Fatalf("recovered %+v (%v) from the stored form", got, ok)
	}
	if _, ok := FromStandIn(tr); ok {
		t.Fatal("an ordinary trigger is no stand-in")
	}
}

// A body that writes, reads or calls something touches tables; one that only sets NEW's values or
// signals does not (carry.Carrier.PrepareSwap creates the stand-ins of the first kind under the
// cut-over lock).
func TestTriggerTouchesTables(t *testing.T) {
	for body, want := range map[string]bool{
		"INSERT INTO audit VALUES ('i', NEW.n, NEW.v)":                        true,
		"BEGIN UPDATE totals SET n = n + 1; END":                              true,
		"SET NEW.total = (SELECT SUM(x) FROM parts WHERE id = NEW.id)":        true,
		"delete from log where id = OLD.id":                                   true,
		"CALL note_change(NEW.id)":                                            true,
		"SET NEW.updated = NOW()":                                             false,
		"BEGIN IF NEW.v < 0 THEN SIGNAL SQLSTATE '45000'; END IF; END":        false,
		"SET NEW.selected_at = NOW(), NEW.inserted = 1, NEW.fromage = 'brie'": false,
	} {
		if got := (Trigger{Body: []byte(body)}).TouchesTables(); got != want {
			t.Errorf("%q: TouchesTables %v, want %v", body, got, want)
		}
	}
}
