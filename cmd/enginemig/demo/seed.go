package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Tables the demo creates. StateTable is the one it converts; BlockedTable is one plan must refuse.
const (
	StateTable   = "horses"
	BlockedTable = "trophies"
)

// seedCoins is the coins value the seed gives row id. The load and the final check use it to know
// what an untouched row must still hold, so the check covers all rows, not only the written ones.
const seedCoinsSQL = "(seq * 7919) %% 100000"

func seedCoins(id int64) int64 { return (id * 7919) % 100000 }

// seedStatements builds the game: players' horses (the big, busy state table), fish, babies, and
// trophies numbered per player by a MyISAM-only AUTO_INCREMENT inside a composite key.
// INSERT ... SELECT FROM seq_1_to_N (MariaDB's sequence engine) fills a million rows in seconds.
func seedStatements(schema string, rows int64) []string {
	q := func(t string) string { return dbconn.QualifiedName(schema, t) }
	small := max(rows/20, 100)
	tiny := max(rows/50, 100)
	return []string{
		fmt.Sprintf(`CREATE TABLE %s (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  player_id INT UNSIGNED NOT NULL,
  name VARCHAR(32) NOT NULL,
  breed TINYINT UNSIGNED NOT NULL,
  speed SMALLINT UNSIGNED NOT NULL,
  stamina SMALLINT UNSIGNED NOT NULL,
  coins INT NOT NULL,
  fed_at DATETIME NOT NULL,
  PRIMARY KEY (id),
  KEY player (player_id)
) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4`, q(StateTable)),
		fmt.Sprintf(`INSERT INTO %s (id, player_id, name, breed, speed, stamina, coins, fed_at)
SELECT seq, seq DIV 3 + 1, CONCAT('horse-', seq), seq %% 12, 40 + seq %% 60, 50 + seq %% 50, `+seedCoinsSQL+`,
  '2025-01-01' + INTERVAL (seq %% 100000) MINUTE FROM %s`, q(StateTable), q(fmt.Sprintf("seq_1_to_%d", rows))),
		fmt.Sprintf(`CREATE TABLE %s (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  player_id INT UNSIGNED NOT NULL,
  species VARCHAR(24) NOT NULL,
  weight_g INT UNSIGNED NOT NULL,
  caught_at DATETIME NOT NULL,
  KEY player (player_id)
) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4`, q("fish")),
		fmt.Sprintf(`INSERT INTO %s (player_id, species, weight_g, caught_at)
SELECT seq DIV 5 + 1, ELT(1 + seq %% 4, 'trout', 'carp', 'pike', 'perch'), 100 + seq %% 5000,
  '2025-01-01' + INTERVAL seq MINUTE FROM %s`, q("fish"), q(fmt.Sprintf("seq_1_to_%d", small))),
		fmt.Sprintf(`CREATE TABLE %s (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  player_id INT UNSIGNED NOT NULL,
  name VARCHAR(32) NOT NULL,
  mood ENUM('happy','sleepy','hungry') NOT NULL,
  born_at DATETIME NOT NULL,
  KEY player (player_id)
) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4`, q("babies")),
		fmt.Sprintf(`INSERT INTO %s (player_id, name, mood, born_at)
SELECT seq DIV 2 + 1, CONCAT('baby-', seq), 1 + seq %% 3, '2025-01-01' + INTERVAL seq MINUTE FROM %s`, q("babies"), q(fmt.Sprintf("seq_1_to_%d", tiny))),
		// MyISAM numbers n per player (1, 2, 3 for each player_id); InnoDB cannot (error 1075).
		fmt.Sprintf(`CREATE TABLE %s (
  player_id INT UNSIGNED NOT NULL,
  n INT UNSIGNED NOT NULL AUTO_INCREMENT,
  trophy VARCHAR(32) NOT NULL,
  PRIMARY KEY (player_id, n)
) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4`, q(BlockedTable)),
		fmt.Sprintf(`INSERT INTO %s (player_id, trophy) SELECT seq %% 100 + 1, CONCAT('cup-', seq) FROM %s`, q(BlockedTable), q("seq_1_to_300")),
	}
}

// seed creates the schema's tables. It runs on a server the demo owns or in a database it created.
func seed(ctx context.Context, db execer, schema string, rows int64) error {
	for _, stmt := range seedStatements(schema, rows) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1146 && strings.Contains(stmt, "seq_1_to_") {
				return fmt.Errorf("seed %s: %w; the demo seeds with MariaDB's sequence engine, which this server lacks (MySQL?): run the demo without connection flags to use its own MariaDB sandbox", schema, err)
			}
			return fmt.Errorf("seed %s: %w", schema, err)
		}
	}
	return nil
}
