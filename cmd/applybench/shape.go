package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/enginemig/enginemig/bench"
)

// shape is a table the benchmark converts and the application's traffic on it: every run seeds
// the table afresh, loads it with requests and converts it, whatever the table is.
type shape interface {
	// table names the table the runs convert (in the game database).
	table() string
	// seed drops and creates table name as MyISAM with rows rows, and flushes it so that it
	// is reopened as a production table would be when a migration starts.
	seed(db *sql.DB, name string, rows int) error
	// request is request n's statements in the order they run.
	request(n int) []*statement
}

// statement is one kind of statement of a shape's request.
type statement struct {
	name string
	// write: counted with the writes (their latency, the longest time without one), else
	// with the reads.
	write bool
	// per is how many of it one request runs.
	per int
	// exec runs one on the table seeded with rows rows.
	exec func(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error
}

// interleave lays out one request: each kind's per statements, taken a round at a time in the
// order of kinds, as a page interleaves its reads and writes rather than running them in blocks.
func interleave(kinds ...*statement) []*statement {
	var out []*statement
	for i := 0; ; i++ {
		n := len(out)
		for _, k := range kinds {
			if i < k.per {
				out = append(out, k)
			}
		}
		if len(out) == n {
			return out
		}
	}
}

// gameShape is the default table: a game's state, an int key, four ints and a name, one
// secondary index, under the production mix (bench.WebMix) on its key, and one DELETE every
// 10th request. -no-autoinc, -keyless, -keyless-ts and -grown change it.
type gameShape struct {
	// nextID is the last key the seed or the load's INSERTs used, for a table without
	// AUTO_INCREMENT.
	nextID atomic.Int64
	mix    []*statement
	delete *statement
}

const gameDDL = `CREATE TABLE %s (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  player INT NOT NULL, coins INT NOT NULL, level SMALLINT NOT NULL, score INT NOT NULL,
  name CHAR(40) NOT NULL,
  PRIMARY KEY (id), KEY player (player)
) ENGINE=MyISAM`

func newGameShape() *gameShape {
	g := &gameShape{}
	mix := bench.WebMix()
	g.mix = interleave(
		&statement{name: "select", per: mix.Select, exec: g.sel},
		&statement{name: "update", write: true, per: mix.Update, exec: g.update},
		&statement{name: "insert", write: true, per: mix.Insert, exec: g.insert})
	g.delete = &statement{name: "delete", write: true, per: 1, exec: g.del}
	return g
}

func (g *gameShape) table() string { return "state" }

func (g *gameShape) request(n int) []*statement {
	if n%10 == 9 {
		return append(g.mix[:len(g.mix):len(g.mix)], g.delete)
	}
	return g.mix
}

// The game's statements but the INSERT work on a row drawn among the seeded ones.
func (g *gameShape) sel(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error {
	var coins, level int
	err := db.QueryRowContext(ctx, "SELECT coins, level FROM state WHERE id = ?", 1+r.IntN(rows)).Scan(&coins, &level)
	if err == sql.ErrNoRows { // deleted by an earlier request
		err = nil
	}
	return err
}

func (g *gameShape) update(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error {
	_, err := db.ExecContext(ctx, "UPDATE state SET coins = coins + 1 WHERE id = ?", 1+r.IntN(rows))
	return err
}

func (g *gameShape) del(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error {
	_, err := db.ExecContext(ctx, "DELETE FROM state WHERE id = ?", 1+r.IntN(rows))
	return err
}

func (g *gameShape) insert(ctx context.Context, db *sql.DB, r *rand.Rand, _ int) error {
	if noAutoInc { // the application picks the key itself
		_, err := db.ExecContext(ctx, "INSERT INTO state (id, player, coins, level, score, name) VALUES (?, ?, 0, 1, 0, 'new')",
			g.nextID.Add(1), r.IntN(100000))
		return err
	}
	_, err := db.ExecContext(ctx, "INSERT INTO state (player, coins, level, score, name) VALUES (?, 0, 1, 0, 'new')", r.IntN(100000))
	return err
}

func (g *gameShape) seed(db *sql.DB, name string, rows int) error {
	if _, err := db.Exec("DROP TABLE IF EXISTS " + name + ", _" + name + "_old, _" + name + "_new"); err != nil {
		return err
	}
	g.nextID.Store(int64(rows))
	if _, err := db.Exec(gameCreate(name)); err != nil {
		return err
	}
	_, err := db.Exec(fmt.Sprintf(`INSERT INTO %s (id, player, coins, level, score, name)
		SELECT seq, seq %% 100000, seq %% 977, seq %% 60, seq * 7 %% 100003, SHA1(seq) FROM seq_1_to_%d`, name, rows))
	if err != nil {
		return err
	}
	if grown {
		if _, err := db.Exec("UPDATE " + name + " SET name = CONCAT(name, CONVERT(LEFT(SHA1(id), 10 + id % 10) USING latin1)) WHERE id % 2 = 0"); err != nil {
			return err
		}
	}
	if keylessTS {
		if _, err := db.Exec("UPDATE " + name + " SET ts = TIMESTAMP'2026-01-01 00:00:00' + INTERVAL (id DIV 10) SECOND + INTERVAL (id % 10) * 1000 MICROSECOND"); err != nil {
			return err
		}
		if _, err := db.Exec("ANALYZE TABLE " + name); err != nil {
			return err
		}
	}
	// With -server-args --myisam-use-mmap=1, MyISAM maps the data file as long as it is when
	// opened.
	_, err = db.Exec("FLUSH TABLES " + name)
	return err
}

// gameCreate is the game table's CREATE TABLE as the flags shape it.
func gameCreate(name string) string {
	create := fmt.Sprintf(gameDDL, name)
	if noAutoInc || keyless {
		create = strings.Replace(create, " AUTO_INCREMENT", "", 1)
	}
	if keyless {
		create = strings.Replace(create, "PRIMARY KEY (id)", "KEY id (id)", 1)
	}
	if grown {
		create = strings.Replace(create, "name CHAR(40)", "name VARCHAR(60)", 1)
	}
	if keylessTS {
		create = strings.Replace(create, "name CHAR(40) NOT NULL,", "name CHAR(40) NOT NULL, ts DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY ts (ts, player),", 1)
	}
	return create
}

// describe names the shape on the run's first line; the game table, the default, goes unnamed.
func describe(sh shape) string {
	if _, ok := sh.(*forumShape); ok {
		return " of forum posts (game.posts; " + forumMixText + ")"
	}
	return ""
}
