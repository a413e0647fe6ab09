package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/plan"
)

// connectionFlags are shared by every command that talks to a server, named as in the mysql client.
func connectionFlags() []cli.Flag {
	const cat = "Connection"
	return []cli.Flag{
		&cli.StringFlag{Name: "host", Aliases: []string{"H"}, Usage: "server host (default localhost; with --socket, localhost means the socket)", Category: cat},
		&cli.IntFlag{Name: "port", Aliases: []string{"P"}, Usage: "server TCP port (default 3306)", Category: cat},
		&cli.StringFlag{Name: "socket", Aliases: []string{"S"}, Usage: "unix socket path", Category: cat},
		&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "user name (default: option file, then $USER)", Category: cat},
		&cli.StringFlag{Name: "password", Usage: "password; prefer ENGINEMIG_PASSWORD, MYSQL_PWD, an option file or --ask-password: enginemig hides a --password value from the process list once started, but it is visible until then", Category: cat},
		&cli.BoolFlag{Name: "ask-password", Aliases: []string{"p"}, Usage: "prompt for the password on the terminal (without one: read a line of standard input; empty means no password)", Category: cat},
		&cli.StringFlag{Name: "defaults-file", Usage: "read [client], [mysql] and [enginemig] groups of this option file instead of ~/.my.cnf", Category: cat},
		&cli.StringFlag{Name: "ssl-mode", Usage: "DISABLED, PREFERRED (default: TLS when the server offers it), REQUIRED, VERIFY_CA or VERIFY_IDENTITY", Category: cat},
		&cli.StringFlag{Name: "ssl-ca", Usage: "CA certificate file (PEM) to verify the server with", Category: cat},
		&cli.StringFlag{Name: "ssl-cert", Usage: "client certificate file (PEM)", Category: cat},
		&cli.StringFlag{Name: "ssl-key", Usage: "client key file (PEM)", Category: cat},
	}
}

// connectionConfig resolves the connection flags, option files and environment into one Config.
func connectionConfig(c *cli.Context) (dbconn.Config, error) {
	flags := dbconn.Config{
		Host:    c.String("host"),
		Port:    c.Int("port"),
		Socket:  c.String("socket"),
		User:    c.String("user"),
		SSLMode: c.String("ssl-mode"),
		SSLCA:   c.String("ssl-ca"),
		SSLCert: c.String("ssl-cert"),
		SSLKey:  c.String("ssl-key"),
	}
	if c.IsSet("password") {
		// Clone first: the flag value shares memory with the process arguments, which
		// overwritePasswordArgs overwrites.
		flags.Password, flags.PasswordSet = dbconn.Secret(strings.Clone(c.String("password"))), true
		overwritePasswordArgs()
	}
	if c.Bool("ask-password") {
		pw, err := promptPassword()
		if err != nil {
			return dbconn.Config{}, outcome.New(outcome.Usage, err, "")
		}
		flags.Password, flags.PasswordSet = dbconn.Secret(pw), true
	}
	cfg, err := dbconn.Resolve(flags, c.String("defaults-file"), os.Getenv)
	if err != nil {
		return dbconn.Config{}, outcome.New(outcome.Usage, err, "")
	}
	return cfg, nil
}

// openDB resolves the settings and connects.
func openDB(ctx context.Context, c *cli.Context, database string, maxConns int) (*sql.DB, dbconn.Config, error) {
	cfg, err := connectionConfig(c)
	if err != nil {
		return nil, cfg, err
	}
	db, err := dbconn.Open(ctx, cfg, database, maxConns)
	return db, cfg, err
}

func promptPassword() (string, error) {
	fmt.Fprint(os.Stderr, "Enter password: ")
	defer fmt.Fprintln(os.Stderr)
	if term.IsTerminal(int(os.Stdin.Fd())) {
		b, err := term.ReadPassword(int(os.Stdin.Fd()))
		return string(b), err
	}
	// Standard input that ends before any character is an empty password, sent as none: an
	// account without a password (common in staging) given to a script or the Ansible role as "".
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("--ask-password: read standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// maxHoldFlag is apply's --max-hold (plan takes it too, to check what apply will refuse).
func maxHoldFlag() cli.Flag {
	return &cli.DurationFlag{Name: "max-hold", Value: plan.DefaultMaxHold,
		Usage: "the longest a table without a unique key or an index to walk may hold the application's writes for its one-chunk copy (longer is refused)",
		Action: func(_ *cli.Context, v time.Duration) error {
			if v <= 0 {
				return outcome.Errorf(outcome.Usage, "--max-hold must be positive, not %s", v)
			}
			return nil
		}}
}

// captureFlag is apply's --capture (plan takes it too, to check what apply will do).
func captureFlag() cli.Flag {
	return &cli.StringFlag{Name: "capture", Value: plan.CaptureAuto,
		Usage: "how changes during the copy are captured: auto (binlog with a ROW binlog and full row images, triggers otherwise), binlog, or triggers",
		Action: func(_ *cli.Context, v string) error {
			switch v {
			case plan.CaptureAuto, plan.CaptureBinlog, plan.CaptureTriggers:
				return nil
			}
			return outcome.Errorf(outcome.Usage, "--capture must be auto, binlog or triggers, not %q", v)
		}}
}
