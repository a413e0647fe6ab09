package bench

import (
	"database/sql"
	"fmt"
	"os"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// srv is one server for the whole package: starting one per test would cost seconds each.
var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// gameTable creates a game-like MyISAM table of n rows: int key, a few ints, a CHAR(40), and a
// secondary index, the shape the benchmark is meant for.
func gameTable(t *testing.T, db *sql.DB, name string, n int) {
	t.Helper()
	sandboxtest.MustExec(t, db,
		fmt.Sprintf("CREATE TABLE `%s` (id INT UNSIGNED NOT NULL AUTO_INCREMENT, level INT NOT NULL, coins INT NOT NULL, "+
			"guild INT NOT NULL, name CHAR(40) NOT NULL, PRIMARY KEY (id), KEY guild (guild)) ENGINE=MyISAM", name),
		fmt.Sprintf("INSERT INTO `%s` (level, coins, guild, name) SELECT seq %% 100, seq %% 1000, seq %% 50, CONCAT('player', seq) FROM seq_1_to_%d", name, n))
}
