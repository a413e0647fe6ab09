package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// DriverConfig converts c to a go-sql-driver config for database (may be empty). Extra session
// variables go into Params. No DSN string containing the password is ever built.
func (c Config) DriverConfig(database string) (*mysql.Config, error) {
	dc := mysql.NewConfig()
	dc.User = c.User
	dc.Passwd = c.Password.Reveal()
	if c.useSocket() {
		dc.Net, dc.Addr = "unix", c.Socket
	} else {
		dc.Net, dc.Addr = "tcp", c.Address()
	}
	dc.DBName = database
	dc.Timeout = 10 * time.Second
	dc.InterpolateParams = true
	dc.AllowNativePasswords = true
	tc, err := c.TLS()
	if err != nil {
		return nil, outcome.New(outcome.Usage, err, "")
	}
	if tc != nil && dc.Net == "tcp" {
		dc.TLS = tc
		if c.SSLMode == SSLPreferred {
			// Fall back to plain text when the server has no TLS, like the mysql client.
			dc.TLSConfig = "preferred"
			dc.TLS = nil
		}
	}
	return dc, nil
}

// Open connects and pings, returning a classified error (outcome.Connection) that names the
// server but never the password.
func Open(ctx context.Context, c Config, database string, maxConns int) (*sql.DB, error) {
	dc, err := c.DriverConfig(database)
	if err != nil {
		return nil, err
	}
	return openOwn(ctx, dc, c, maxConns)
}

// openOwn opens a pool whose connections are registered as this process's own (see IsOwn).
func openOwn(ctx context.Context, dc *mysql.Config, c Config, maxConns int) (*sql.DB, error) {
	connector, err := mysql.NewConnector(dc)
	if err != nil {
		return nil, outcome.New(outcome.Usage, fmt.Errorf("connection settings: %w", err), "")
	}
	return openConnector(ctx, ownConnector{Connector: connector, key: c.ownKey(), useKey: c.useKey()}, dc, c.Address(), maxConns)
}

// OpenDriverConfig opens a pool from an already built driver config (used for binary-charset
// sessions and tests).
func OpenDriverConfig(ctx context.Context, dc *mysql.Config, where string, maxConns int) (*sql.DB, error) {
	connector, err := mysql.NewConnector(dc)
	if err != nil {
		return nil, outcome.New(outcome.Usage, fmt.Errorf("connection settings: %w", err), "")
	}
	return openConnector(ctx, connector, dc, where, maxConns)
}

func openConnector(ctx context.Context, connector driver.Connector, dc *mysql.Config, where string, maxConns int) (*sql.DB, error) {
	db := sql.OpenDB(connector)
	if maxConns > 0 {
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, Classify(err, dc.User, where, dc.DBName)
	}
	return db, nil
}

// Classify turns a connect-time driver error into a coded error with a remedy. Driver messages are
// quoted as they are: they never carry the password, because no DSN string with the password is
// ever built (configs go to the driver as structs).
func Classify(err error, user, where, database string) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1045:
			return outcome.New(outcome.Connection, fmt.Errorf("access denied for user %q at %s", user, where),
				"check --user and the password (--password, --ask-password, ENGINEMIG_PASSWORD/MYSQL_PWD or the option file)")
		case 1049:
			return outcome.New(outcome.Usage, fmt.Errorf("unknown database %q on %s", database, where),
				"check --database")
		case 1044:
			return outcome.New(outcome.Refused, fmt.Errorf("user %q may not use database %q on %s", user, database, where),
				"grant the privileges listed in docs/reference.md, \"Privileges\"")
		}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "connection refused") {
		return outcome.New(outcome.Connection, fmt.Errorf("cannot reach MySQL/MariaDB at %s: %v", where, err),
			"check --host/--port/--socket and that the server is running")
	}
	return outcome.New(outcome.Connection, fmt.Errorf("connect to %s: %v", where, err), "")
}
