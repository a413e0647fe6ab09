package demo

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
)

// target is the server the demo runs on and how to leave it.
type target struct {
	conn    dbconn.Config
	db      *sql.DB
	schema  string
	srv     *sandbox.Server
	cleanup func(ctx context.Context)
}

// sandboxSchema is the database the demo creates on its own sandbox: the game's.
const sandboxSchema = "game"

// openTarget starts the sandbox or connects to the given server and creates the scratch database.
func openTarget(ctx context.Context, cfg *Config, poolSize int) (*target, error) {
	t := &target{}
	if cfg.Conn == nil {
		if err := sandbox.Available(); err != nil {
			return nil, err
		}
		say(cfg.Out, "Starting a private MariaDB server (binlog ROW, FULL row image) in a temporary directory...")
		srv, err := sandbox.Start(ctx, sandbox.Options{Dir: cfg.SandboxDir, Keep: cfg.Keep, BufferPool: "512M",
			ExtraArgs: []string{"--key-buffer-size=128M"}})
		if err != nil {
			return nil, fmt.Errorf("start sandbox server: %w", err)
		}
		t.srv = srv
		t.conn = dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
		t.schema = sandboxSchema
		say(cfg.Out, "  server on 127.0.0.1:%d, data in %s", srv.Port, srv.Dir)
		cfg.Logger.Debug("demo: sandbox server started", slog.Int("port", srv.Port), slog.String("dir", srv.Dir), slog.Bool("keep", cfg.Keep))
	} else {
		t.conn = *cfg.Conn
		t.schema = cfg.Database
	}
	db, err := dbconn.Open(ctx, t.conn, "", poolSize)
	if err != nil {
		t.close(ctx, cfg)
		return nil, err
	}
	t.db = db
	if err := t.createSchema(ctx, cfg.Logger); err != nil {
		t.close(ctx, cfg)
		return nil, err
	}
	return t, nil
}

// createSchema refuses a non-empty database: on a real server the demo must never touch tables
// it did not create.
func (t *target) createSchema(ctx context.Context, logger *slog.Logger) error {
	var n int
	if err := t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", t.schema).Scan(&n); err != nil {
		return fmt.Errorf("check database %s: %w", t.schema, err)
	}
	if n > 0 {
		return fmt.Errorf("database %s already has %d table(s); the demo only uses an empty database it may drop afterwards (drop it, or pick another with --database)", t.schema, n)
	}
	if _, err := t.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbconn.QuoteIdent(t.schema)); err != nil {
		return fmt.Errorf("create database %s: %w", t.schema, err)
	}
	t.cleanup = func(ctx context.Context) {
		if _, err := t.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbconn.QuoteIdent(t.schema)); err != nil {
			logger.Warn("demo: could not drop the scratch database; drop it by hand", slog.String("database", t.schema), slog.Any("error", err))
		}
	}
	return nil
}

// close drops the scratch database (existing server) or stops the sandbox, unless Keep.
func (t *target) close(ctx context.Context, cfg *Config) {
	ctx = context.WithoutCancel(ctx)
	if cfg.Keep {
		if t.srv != nil {
			say(cfg.Out, "\nThe sandbox server keeps running (--keep). Connect with:\n  mariadb -h127.0.0.1 -P%d -uroot %s\n"+
				"Stop it and remove its files with:\n  kill $(cat %s/mariadbd.pid) && rm -rf %s",
				t.srv.Port, t.schema, t.srv.Dir, t.srv.Dir)
		} else {
			say(cfg.Out, "\nThe database %s was kept (--keep); drop it with DROP DATABASE %s", t.schema, dbconn.QuoteIdent(t.schema))
		}
		if t.db != nil {
			t.db.Close()
		}
		return
	}
	if t.srv == nil && t.cleanup != nil {
		t.cleanup(ctx)
	}
	if t.db != nil {
		t.db.Close()
	}
	if t.srv != nil {
		if err := t.srv.Stop(); err != nil {
			cfg.Logger.Warn("demo: could not stop the sandbox server or remove its directory", slog.String("dir", t.srv.Dir), slog.Any("error", err))
		}
	}
}
