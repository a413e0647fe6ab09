package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// `enginemig answers` names the statement whose answer changes (exit 5) and not the one whose
// answer stays, lets the accepted one through, refuses a bad accept file, and leaves the table
// as it was; `enginemig apply --answers FILE` (otherwise its defaults) stops on the same
// statement with nothing changed, and converts once it is accepted.
func TestAnswersCommand(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE events (id INT PRIMARY KEY, kind INT NOT NULL, note CHAR(20), KEY (kind)) ENGINE=MyISAM",
		"INSERT INTO events SELECT seq, seq % 6, CONCAT('note ', seq) FROM "+sandboxtest.Seq(600),
		"DELETE FROM events WHERE id <= 60",
		"INSERT INTO events SELECT 1000 + seq, seq % 6, CONCAT('again ', seq) FROM "+sandboxtest.Seq(60))
	checksum := func() string {
		var n, c string
		if err := db.QueryRow("CHECKSUM TABLE events").Scan(&n, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := checksum()
	dir := t.TempDir()
	empty := filepath.Join(dir, "my.cnf")
	stmts := filepath.Join(dir, "statements.sql")
	changing := "SELECT id, note FROM events WHERE kind = 3 LIMIT 5"
	staying := "SELECT id, note FROM events WHERE kind = 3 ORDER BY id LIMIT 5"
	for path, text := range map[string]string{empty: "", stmts: "-- the application's reads\n" + changing + ";\n" + staying + ";\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"answers", "--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root",
		"--ssl-mode", "DISABLED", "--database", schema, "--table", "events", "--statements", stmts}
	out, code := runCLI(t, args...)
	t.Log(out)
	if code != outcome.GateFailed || !strings.Contains(out, "CHANGES") || !strings.Contains(out, changing) || strings.Contains(out, staying) ||
		!strings.Contains(out, "limit-without-order-by") {
		t.Fatalf("want exit 5 naming only %q with its cause, got exit %d", changing, code)
	}
	digest := regexp.MustCompile(`CHANGES ([0-9a-f]{16})`).FindStringSubmatch(out)[1]
	accept := filepath.Join(dir, "accepted")
	if err := os.WriteFile(accept, []byte(digest+" "+changing+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, append(args, "--accept", accept)...); code != outcome.OK || !strings.Contains(out, "changes (accepted)") {
		t.Fatalf("accepted: want exit 0 with the statement shown as accepted, got exit %d:\n%s", code, out)
	}
	if err := os.WriteFile(accept, []byte("not-a-digest\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, code, err := runCLIErr(append(args, "--accept", accept)...); code != outcome.Usage || err == nil || !strings.Contains(err.Error(), "is not a statement digest") {
		t.Fatalf("bad accept file: want exit 2 saying what is wrong, got exit %d: %v", code, err)
	}
	if after := checksum(); after != before {
		t.Fatalf("the check changed the table: checksum %s, was %s", after, before)
	}

	// apply runs the same check first: stopped with the table untouched, then, accepted, converted.
	apply := append([]string{"apply"}, args[1:len(args)-2]...)
	if _, code, err := runCLIErr(append(apply, "--answers", stmts)...); code != outcome.GateFailed || err == nil || !strings.Contains(err.Error(), changing) {
		t.Fatalf("apply --answers: want exit 5 naming %q, got exit %d: %v", changing, code, err)
	}
	var engine string
	if db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'events'").Scan(&engine); engine != "MyISAM" || checksum() != before {
		t.Fatalf("a stopped apply changed the table (engine %s)", engine)
	}
	if err := os.WriteFile(accept, []byte(digest+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, append(apply, "--answers", stmts, "--answers-accept", accept)...); code != outcome.OK {
		t.Fatalf("apply with the statement accepted: exit %d\n%s", code, out)
	}
	if db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'events'").Scan(&engine); engine != "InnoDB" {
		t.Fatalf("apply with the statement accepted left the table %s", engine)
	}
}

// `enginemig answers --native` compares with what a plain ALTER TABLE ... ENGINE=InnoDB would
// answer: a search for a word MyISAM ignores (a stopword of its list, not of InnoDB's) answers the
// same on apply's shadow, whose FULLTEXT index keeps MyISAM's stopwords, and differently on the
// native table, whose index keeps InnoDB's.
func TestAnswersCommandNative(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	// "because" is in a tenth of the rows (far from the 50% threshold) and on MyISAM's stopword
	// list, not InnoDB's.
	sandboxtest.MustExec(t, db, "CREATE TABLE articles (id INT PRIMARY KEY, body TEXT, FULLTEXT (body)) ENGINE=MyISAM",
		"INSERT INTO articles SELECT seq, IF(seq % 10 = 0, CONCAT('closed because spam ', seq), CONCAT('ordinary words ', seq)) FROM "+sandboxtest.Seq(200))
	dir := t.TempDir()
	empty, stmts := filepath.Join(dir, "my.cnf"), filepath.Join(dir, "statements.sql")
	search := "SELECT id FROM articles WHERE MATCH (body) AGAINST ('because')"
	for path, text := range map[string]string{empty: "", stmts: search + ";\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"answers", "--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root",
		"--ssl-mode", "DISABLED", "--database", schema, "--table", "articles", "--statements", stmts}
	if out, code := runCLI(t, args...); code != outcome.OK {
		t.Fatalf("against apply's shadow: want exit 0 (the same answer), got exit %d:\n%s", code, out)
	}
	out, code := runCLI(t, append(args, "--native")...)
	if code != outcome.GateFailed || !strings.Contains(out, search) || !strings.Contains(out, "fulltext-stopword") {
		t.Fatalf("--native: want exit 5 naming the search with cause fulltext-stopword, got exit %d:\n%s", code, out)
	}
}

// apply --plan checks every table's statements before converting the first, and names every
// statement whose answer changes at once (exit 5, nothing converted, no shadow); with their new
// answers accepted it converts the plan.
func TestApplyPlanNamesEveryChangingAnswerFirst(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	var changing []string
	for _, tbl := range []string{"events1", "events2"} {
		sandboxtest.MustExec(t, db, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY, kind INT NOT NULL, note CHAR(20), KEY (kind)) ENGINE=MyISAM",
			"INSERT INTO "+tbl+" SELECT seq, seq % 6, CONCAT('note ', seq) FROM "+sandboxtest.Seq(600),
			"DELETE FROM "+tbl+" WHERE id <= 60",
			"INSERT INTO "+tbl+" SELECT 1000 + seq, seq % 6, CONCAT('again ', seq) FROM "+sandboxtest.Seq(60))
		changing = append(changing, "SELECT id, note FROM "+tbl+" WHERE kind = 3 LIMIT 5")
	}
	sandboxtest.MustExec(t, db, "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')")
	sandboxtest.MustExec(t, db, changing...)
	dir := t.TempDir()
	empty := filepath.Join(dir, "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED"}
	planFile := filepath.Join(dir, "plan.json")
	if out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--out", planFile)...); code != outcome.OK {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	_, code, err := runCLIErr(append(append([]string{"apply"}, conn...), "--plan", planFile, "--no-progress")...)
	if code != outcome.GateFailed || err == nil {
		t.Fatalf("apply --plan: exit %d (%v), want %d", code, err, outcome.GateFailed)
	}
	for _, stmt := range changing {
		if !strings.Contains(err.Error(), stmt) {
			t.Errorf("the refusal does not name %q: %v", stmt, err)
		}
	}
	for _, tbl := range []string{"events1", "events2"} {
		var engine string
		if err := db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, tbl).Scan(&engine); err != nil || engine != "MyISAM" {
			t.Errorf("%s after the refusal: %q (%v), want MyISAM", tbl, engine, err)
		}
		var shadows int
		db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, "_"+tbl+"_new").Scan(&shadows)
		if shadows != 0 {
			t.Errorf("a shadow of %s after the refusal", tbl)
		}
	}
	accept := filepath.Join(dir, "accept.txt")
	if err := os.WriteFile(accept, []byte(answers.Digest(changing[0])+"\n"+answers.Digest(changing[1])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, append(append([]string{"apply"}, conn...), "--plan", planFile, "--answers-accept", accept, "--no-progress")...); code != outcome.OK || strings.Count(out, " converted: ") != 2 {
		t.Fatalf("apply --plan with the answers accepted: exit %d\n%s", code, out)
	}
}
