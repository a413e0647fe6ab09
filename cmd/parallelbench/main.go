// Command parallelbench measures `enginemig apply --plan --parallel N`: on a sandbox server it
// seeds identical game-state tables (int key, four ints, a CHAR(40), one secondary index), plans
// them, and times the whole plan for each N, on freshly seeded tables each time, twice per N in
// alternating order so the machine's mood does not favour one.
//
//	go run ./cmd/parallelbench -tables 4 -rows 300000 -parallel 1,2
//
// It starts its own sandbox server and builds enginemig; nothing else is touched.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
)

func main() {
	tables := flag.Int("tables", 4, "tables in the plan")
	rows := flag.Int("rows", 300_000, "rows per table")
	parallel := flag.String("parallel", "1,2", "values of --parallel to compare, comma separated")
	rounds := flag.Int("rounds", 2, "runs per value (alternating)")
	flag.Parse()
	if err := run(context.Background(), *tables, *rows, *parallel, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "parallelbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, tables, rows int, parallelFlag string, rounds int) error {
	bin := filepath.Join(os.TempDir(), "enginemig-parallelbench")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/enginemig").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	srv, err := sandbox.Start(ctx, sandbox.Options{BufferPool: "1G", ExtraArgs: []string{"--key-buffer-size=256M"}})
	if err != nil {
		return err
	}
	defer srv.Stop()
	db, err := srv.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	conn := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED"}
	var values []int
	for _, v := range strings.Split(parallelFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return err
		}
		values = append(values, n)
	}
	fmt.Printf("%d tables of %d rows, %d cores\n", tables, rows, numCPU())
	for r := 0; r < rounds; r++ {
		for i := range values {
			n := values[i]
			if r%2 == 1 {
				n = values[len(values)-1-i]
			}
			took, err := once(db, bin, conn, tables, rows, n)
			if err != nil {
				return err
			}
			fmt.Printf("  --parallel %d: %.2fs\n", n, took.Seconds())
		}
	}
	return nil
}

// once seeds the tables afresh, plans them and times apply --plan.
func once(db *sql.DB, bin string, conn []string, tables, rows, parallel int) (time.Duration, error) {
	stmts := []string{"DROP DATABASE IF EXISTS pbench", "DROP DATABASE IF EXISTS _enginemig", "CREATE DATABASE pbench"}
	for i := 1; i <= tables; i++ {
		stmts = append(stmts, fmt.Sprintf(`CREATE TABLE pbench.t%d (id INT UNSIGNED NOT NULL, player INT NOT NULL, coins INT NOT NULL,
			level SMALLINT NOT NULL, score INT NOT NULL, name CHAR(40) NOT NULL, PRIMARY KEY (id), KEY player (player)) ENGINE=MyISAM`, i),
			fmt.Sprintf(`INSERT INTO pbench.t%d SELECT seq, seq %% 100000, seq %% 977, seq %% 60, seq * 7 %% 100003, SHA1(seq) FROM pbench.seq_1_to_%d`, i, rows))
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			return 0, err
		}
	}
	planFile := filepath.Join(os.TempDir(), "parallelbench-plan.json")
	if out, err := exec.Command(bin, append(append([]string{"plan"}, conn...), "--database", "pbench", "--out", planFile)...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("plan: %v\n%s", err, out)
	}
	start := time.Now()
	out, err := exec.Command(bin, append(append([]string{"apply"}, conn...), "--plan", planFile, "--parallel", strconv.Itoa(parallel), "--no-progress")...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("apply --parallel %d: %v\n%s", parallel, err, out)
	}
	return time.Since(start), nil
}

func numCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
