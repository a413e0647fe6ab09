package plan

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// Leftover is a MyISAM table plan --check found outside the system schemas.
type Leftover struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Engine string `json:"engine"` // MyISAM, or MRG_MyISAM for a MERGE table
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"` // data and indexes
	// KeptOriginal: the table is `_t_old`, the original enginemig keeps beside a converted `t`
	// for a rollback; no application writes it, and enginemig cleanup --drop-old removes it.
	KeptOriginal bool `json:"kept_original,omitempty"`
}

// leftoversSQL lists the MyISAM (and MERGE) tables the account can see outside the system schemas,
// and for each whether a table of the same name without the kept original's `_..._old` wrapping
// exists in InnoDB beside it (no LIKE: '\_' means another thing under NO_BACKSLASH_ESCAPES).
const leftoversSQL = `SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.ENGINE, COALESCE(t.TABLE_ROWS, 0),
	COALESCE(t.DATA_LENGTH, 0) + COALESCE(t.INDEX_LENGTH, 0),
	EXISTS (SELECT 1 FROM information_schema.TABLES c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA
		AND LEFT(t.TABLE_NAME, 1) = '_' AND RIGHT(t.TABLE_NAME, 4) = '_old'
		AND c.TABLE_NAME = SUBSTRING(t.TABLE_NAME, 2, CHAR_LENGTH(t.TABLE_NAME) - 5)
		AND c.ENGINE = 'InnoDB')
	FROM information_schema.TABLES t
	WHERE t.TABLE_TYPE = 'BASE TABLE' AND t.ENGINE IN ('MyISAM', 'MRG_MYISAM')
	AND t.TABLE_SCHEMA NOT IN ('mysql', 'sys', 'performance_schema', 'information_schema')`

// Leftovers lists the MyISAM tables outside the system schemas that the account can see (all of
// them, or those of databases when given), for plan --check.
func Leftovers(ctx context.Context, db *sql.DB, databases []string) ([]Leftover, error) {
	query, args := leftoversSQL, []any{}
	if len(databases) > 0 {
		query += " AND t.TABLE_SCHEMA IN (?" + strings.Repeat(", ?", len(databases)-1) + ")"
		for _, d := range databases {
			args = append(args, d)
		}
	}
	rows, err := db.QueryContext(ctx, query+" ORDER BY t.TABLE_SCHEMA, t.TABLE_NAME", args...)
	if err != nil {
		return nil, fmt.Errorf("list MyISAM tables: %w", err)
	}
	defer rows.Close()
	var out []Leftover
	for rows.Next() {
		var l Leftover
		if err := rows.Scan(&l.Schema, &l.Table, &l.Engine, &l.Rows, &l.Bytes, &l.KeptOriginal); err != nil {
			return nil, fmt.Errorf("list MyISAM tables: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// ApplicationTables is how many leftovers are the application's (not kept originals): what
// fails plan --check.
func ApplicationTables(ls []Leftover) int {
	n := 0
	for _, l := range ls {
		if !l.KeptOriginal {
			n++
		}
	}
	return n
}

// DoorStep is one way to keep MyISAM out of a server once its tables are converted.
type DoorStep struct {
	Setting    string `json:"setting"`
	Statement  string `json:"statement"` // what to run or put in the server's configuration
	Persistent string `json:"persistent,omitempty"`
	What       string `json:"what"`   // what it does
	Breaks     string `json:"breaks"` // what it breaks, and what to check first
}

// KeepMyISAMOut is how to keep new MyISAM tables off a server of flavor ("mariadb" or "mysql"),
// strongest first. Every step keeps existing tables readable and writable.
func KeepMyISAMOut(flavor string) []DoorStep {
	engine := DoorStep{Setting: "default_storage_engine",
		Statement:  "SET GLOBAL default_storage_engine = InnoDB; SET GLOBAL default_tmp_storage_engine = InnoDB;",
		Persistent: "[mysqld] default_storage_engine = InnoDB and default_tmp_storage_engine = InnoDB in the server's configuration",
		What:       "a CREATE TABLE without ENGINE= makes InnoDB (new sessions)",
		Breaks:     "nothing that names its engine; an application that creates MyISAM tables explicitly still can"}
	noSubst := DoorStep{Setting: "sql_mode",
		Statement: "add NO_ENGINE_SUBSTITUTION to the global sql_mode (SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_ENGINE_SUBSTITUTION'))",
		What:      "with the setting above, a CREATE TABLE ... ENGINE=MyISAM fails instead of silently making InnoDB",
		Breaks:    "install or upgrade scripts that still name ENGINE=MyISAM stop with an error (which is how they are found); without it they get InnoDB and a warning"}
	if strings.EqualFold(flavor, "mariadb") {
		return []DoorStep{{Setting: "enforce_storage_engine",
			Statement:  "SET GLOBAL enforce_storage_engine = InnoDB;",
			Persistent: "[mysqld] enforce_storage_engine = InnoDB in the server's configuration",
			What:       "every new table is InnoDB, whatever ENGINE= says (needs SUPER; new sessions; a session with SUPER can still override it)",
			Breaks: "CREATE TABLE ... ENGINE=MyISAM fails under NO_ENGINE_SUBSTITUTION, else makes InnoDB with a warning; " +
				"turn it off while mariadb-upgrade runs (the system tables are Aria and MyISAM); CREATE TEMPORARY TABLE ... ENGINE=MEMORY or Aria is affected too"},
			engine, noSubst}
	}
	return []DoorStep{{Setting: "disabled_storage_engines",
		Statement:  "not dynamic: set it in the server's configuration and restart",
		Persistent: "[mysqld] disabled_storage_engines = \"MyISAM,MRG_MYISAM,BLACKHOLE,FEDERATED,ARCHIVE\"",
		What:       "CREATE TABLE and ALTER TABLE ... ENGINE= with a listed engine fail (or substitute the default without NO_ENGINE_SUBSTITUTION); existing tables of those engines stay readable and writable",
		Breaks:     "nothing in the mysql schema (InnoDB since MySQL 8.0); the server ignores it during --initialize and with --skip-grant-tables; an application creating MyISAM tables explicitly errors"},
		engine, noSubst}
}

// CheckRemedy is what plan --check says when application tables are still MyISAM.
func CheckRemedy(ls []Leftover) string {
	var dbs []string
	seen := map[string]bool{}
	for _, l := range ls {
		if !l.KeptOriginal && !seen[l.Schema] {
			seen[l.Schema] = true
			dbs = append(dbs, l.Schema)
		}
	}
	sort.Strings(dbs)
	return "convert them: enginemig plan --database " + strings.Join(dbs, ",") + " --out plan.json, then enginemig apply --plan plan.json"
}
