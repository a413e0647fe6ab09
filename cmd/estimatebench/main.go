// Command estimatebench measures plan's copy estimate against real apply runs: on a sandbox
// server it seeds tables of three shapes, takes plan's estimate (a 2000-row sample read by key,
// scaled), runs apply on each table, and prints the estimate beside the copy and index build.
// The "read" column is the sample's rate scaled to the table, before plan's copy/read ratio: the
// ratio the table implies is actual / read. plan/estimate.go's copyReadRatio came from this.
//
//	go run ./cmd/estimatebench -rows 300000,1000000
//
// It starts its own sandbox server; nothing else is touched.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/plan"
)

// shapes are the tables measured: the applybench game table (int key, one secondary index), a
// composite-key table like employees.salaries (no secondary index), and a wide one with text.
var shapes = []struct{ name, ddl, seed string }{
	{"game", `CREATE TABLE game (id INT UNSIGNED NOT NULL, player INT NOT NULL, coins INT NOT NULL, level SMALLINT NOT NULL,
		score INT NOT NULL, name CHAR(40) NOT NULL, PRIMARY KEY (id), KEY player (player)) ENGINE=MyISAM`,
		`INSERT INTO game SELECT seq, seq %% 100000, seq %% 977, seq %% 60, seq * 7 %% 100003, SHA1(seq) FROM seq_1_to_%d`},
	{"salaries", `CREATE TABLE salaries (emp_no INT NOT NULL, salary INT NOT NULL, from_date DATE NOT NULL, to_date DATE NOT NULL,
		PRIMARY KEY (emp_no, from_date)) ENGINE=MyISAM`,
		`INSERT INTO salaries SELECT 10001 + seq DIV 10, 40000 + seq %% 50000, '1985-01-01' + INTERVAL (seq %% 10) YEAR,
		'1986-01-01' + INTERVAL (seq %% 10) YEAR FROM seq_0_to_%d`},
	{"wide", `CREATE TABLE wide (id INT NOT NULL, title VARCHAR(255) NOT NULL, body TEXT NOT NULL, created DATETIME NOT NULL,
		PRIMARY KEY (id), KEY created (created), KEY title (title(20))) ENGINE=MyISAM`,
		`INSERT INTO wide SELECT seq, REPEAT(MD5(seq), 3), REPEAT(SHA1(seq), 12), '2020-01-01' + INTERVAL seq MINUTE FROM seq_1_to_%d`},
}

func main() {
	rowsFlag := flag.String("rows", "300000,1000000", "row counts, comma separated (the wide table gets a fifth of each)")
	flag.IntVar(&copyWorkers, "copy-workers", 0, "apply's --copy-workers (0: as apply chooses; 1 measures the one-chunk ratio on tables plan expects to copy in parallel)")
	flag.Parse()
	if err := run(context.Background(), *rowsFlag); err != nil {
		fmt.Fprintln(os.Stderr, "estimatebench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rowsFlag string) error {
	srv, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	conn := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	db, err := dbconn.Open(ctx, conn, "", 8)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Printf("%-9s %9s %7s %8s %8s %9s %8s %8s %8s %8s %7s %7s\n", "table", "rows", "workers", "read", "estimate", "copy", "index", "actual", "verify", "total", "act/est", "act/read")
	for _, rs := range strings.Split(rowsFlag, ",") {
		rows, err := strconv.Atoi(strings.TrimSpace(rs))
		if err != nil {
			return err
		}
		for _, sh := range shapes {
			n := rows
			if sh.name == "wide" {
				n = rows / 5
			}
			if err := measure(ctx, db, conn, sh.name, sh.ddl, sh.seed, n); err != nil {
				return err
			}
		}
	}
	return nil
}

var copyWorkers int

func measure(ctx context.Context, db *sql.DB, conn dbconn.Config, name, ddl, seed string, rows int) error {
	schema := fmt.Sprintf("est_%s_%d", name, rows)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + schema, "CREATE DATABASE " + schema, "USE " + schema} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	sdb, err := dbconn.Open(ctx, conn, schema, 1)
	if err != nil {
		return err
	}
	defer sdb.Close()
	if _, err := sdb.ExecContext(ctx, ddl); err != nil {
		return err
	}
	if _, err := sdb.ExecContext(ctx, fmt.Sprintf(seed, rows)); err != nil {
		return err
	}
	e, err := plan.EstimateTable(ctx, db, schema, name, 0)
	if err != nil {
		return err
	}
	read := e.SampleSeconds / float64(e.SampleRows) * float64(e.Rows)
	res, err := migration.Run(ctx, db, migration.Options{Conn: conn, Schema: schema, Table: name, CopyWorkers: copyWorkers})
	if err != nil {
		return err
	}
	actual := (res.CopyTime + res.IndexTime).Seconds()
	var verify time.Duration
	if res.Verify != nil {
		verify = res.Verify.Duration
	}
	fmt.Printf("%-9s %9d %7d %7.2fs %7.2fs %8.2fs %7.2fs %7.2fs %7.2fs %7.2fs %7.2f %7.2f\n", name, e.Rows, res.CopyWorkers, read, e.CopySeconds,
		res.CopyTime.Seconds(), res.IndexTime.Seconds(), actual, verify.Seconds(), res.TotalTime.Seconds(), actual/e.CopySeconds, actual/read)
	_, err = db.ExecContext(ctx, "DROP DATABASE "+schema)
	return err
}
