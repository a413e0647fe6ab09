// Command benchsandbox starts a private MariaDB sandbox with a game-like table in MyISAM and InnoDB
// form, for reproducing the measurements in docs/bench/measured.md (bench/scripts/sweep.sh
// drives it). It is a measurement tool, not part of enginemig, and not run by the tests.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
)

func main() {
	rows := flag.Int("rows", 2000000, "rows in the game table")
	info := flag.String("info", "", "file to write the server's port to once the tables are ready")
	bufferPool := flag.String("buffer-pool", "1G", "innodb_buffer_pool_size: the table fits in memory, as a hot production table does")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := sandbox.Start(ctx, sandbox.Options{BufferPool: *bufferPool, ExtraArgs: []string{"--key-buffer-size=256M", "--max-connections=1000"}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	db, err := srv.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := seed(ctx, db, *rows); err != nil {
		srv.Stop()
		log.Fatal(err)
	}
	log.Printf("sandbox ready: 127.0.0.1:%d (socket %s), game.players_myisam and game.players_innodb with %d rows", srv.Port, srv.Socket, *rows)
	if *info != "" {
		if err := os.WriteFile(*info, []byte(fmt.Sprintf("%d\n%s\n", srv.Port, srv.Socket)), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	<-ctx.Done()
}

// seed builds the game table: int key, a few ints, a CHAR(40), one secondary index.
func seed(ctx context.Context, db *sql.DB, rows int) error {
	began := time.Now()
	for _, q := range []string{
		"CREATE DATABASE game",
		"CREATE TABLE game.players_myisam (id INT UNSIGNED NOT NULL AUTO_INCREMENT, level INT NOT NULL, coins INT NOT NULL, " +
			"guild INT NOT NULL, last_seen INT NOT NULL, name CHAR(40) NOT NULL, PRIMARY KEY (id), KEY guild (guild)) ENGINE=MyISAM",
		fmt.Sprintf("INSERT INTO game.players_myisam (level, coins, guild, last_seen, name) SELECT seq %% 100, (seq * 7919) %% 100000, "+
			"seq %% 5000, seq, CONCAT('player-', seq) FROM game.seq_1_to_%d", rows),
		"CREATE TABLE game.players_innodb LIKE game.players_myisam",
		"ALTER TABLE game.players_innodb ENGINE=InnoDB",
		"INSERT INTO game.players_innodb SELECT * FROM game.players_myisam",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	log.Printf("seeded %d rows twice in %s", rows, time.Since(began).Round(time.Second))
	return nil
}
