package dbconn

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePrecedence(t *testing.T) {
	dir := t.TempDir()
	cnf := filepath.Join(dir, "my.cnf")
	os.WriteFile(cnf, []byte("[mysqld]\nuser=wrong\n[client]\nuser = fileuser\npassword=\"file pw # not a comment\"\nport=3307 # comment\nhost=db1\n[enginemig]\nhost=db2\n"), 0o600)

	c, err := Resolve(Config{}, cnf, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "fileuser" || c.Host != "db2" || c.Port != 3307 || c.Password.Reveal() != "file pw # not a comment" {
		t.Fatalf("from file: %+v pw=%q", c, c.Password.Reveal())
	}
	c, _ = Resolve(Config{User: "flaguser"}, cnf, env(map[string]string{"MYSQL_PWD": "envpw"}))
	if c.User != "flaguser" || c.Password.Reveal() != "envpw" {
		t.Fatalf("flags/env must win: %+v", c)
	}
	c, _ = Resolve(Config{}, cnf, env(map[string]string{"MYSQL_PWD": "a", "ENGINEMIG_PASSWORD": "b"}))
	if c.Password.Reveal() != "b" {
		t.Fatalf("ENGINEMIG_PASSWORD must win over MYSQL_PWD")
	}
	c, _ = Resolve(Config{Password: "flagpw", PasswordSet: true}, cnf, env(map[string]string{"MYSQL_PWD": "a"}))
	if c.Password.Reveal() != "flagpw" {
		t.Fatalf("flag password must win")
	}
	// ~/.my.cnf is read when no --defaults-file is given; its absence is fine.
	home := t.TempDir()
	if _, err := Resolve(Config{}, "", env(map[string]string{"HOME": home})); err != nil {
		t.Fatalf("missing ~/.my.cnf must be ignored: %v", err)
	}
	os.WriteFile(filepath.Join(home, ".my.cnf"), []byte("[client]\nuser=homeuser\n"), 0o600)
	c, _ = Resolve(Config{}, "", env(map[string]string{"HOME": home}))
	if c.User != "homeuser" {
		t.Fatalf("~/.my.cnf not read: %+v", c)
	}
	if _, err := Resolve(Config{}, filepath.Join(dir, "missing.cnf"), env(nil)); err == nil {
		t.Fatal("an explicit --defaults-file that is missing must be an error")
	}
	if _, err := Resolve(Config{SSLMode: "sometimes"}, "", env(nil)); err == nil {
		t.Fatal("bad ssl mode accepted")
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	c := Config{User: "u", Password: "hunter2-secret", PasswordSet: true}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(c.Password)} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("password printed: %s", s)
		}
	}
	b, _ := json.Marshal(c)
	if strings.Contains(string(b), "hunter2") {
		t.Fatalf("password in JSON: %s", b)
	}
}

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{"t": "`t`", "a`b": "`a``b`", "sé lect": "`sé lect`", "``": "``````"} {
		if got := QuoteIdent(in); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestOpenClassifiesErrorsWithoutPassword(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	root, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sandboxtest.MustExec(t, root, "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'right-pass'")
	ctx := context.Background()
	base := Config{Host: "127.0.0.1", Port: srv.Port, User: "app", SSLMode: SSLDisabled}

	good := base
	good.Password, good.PasswordSet = "right-pass", true
	db, err := Open(ctx, good, "", 2)
	if err != nil {
		t.Fatalf("good password: %v", err)
	}
	db.Close()

	bad := base
	bad.Password, bad.PasswordSet = "wrong-pass-XYZ", true
	_, err = Open(ctx, bad, "", 2)
	if outcome.CodeOf(err) != outcome.Connection || !strings.Contains(err.Error(), "access denied") {
		t.Fatalf("wrong password: code %d, %v", outcome.CodeOf(err), err)
	}
	if strings.Contains(err.Error(), "wrong-pass-XYZ") {
		t.Fatalf("password leaked: %v", err)
	}

	rootCfg := Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: SSLPreferred}
	_, err = Open(ctx, rootCfg, "no_such_db", 2)
	if outcome.CodeOf(err) != outcome.Usage || !strings.Contains(err.Error(), "unknown database") {
		t.Fatalf("unknown db: %v", err)
	}

	unreachable := Config{Host: "127.0.0.1", Port: 1, User: "root", SSLMode: SSLDisabled}
	_, err = Open(ctx, unreachable, "", 2)
	if outcome.CodeOf(err) != outcome.Connection || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("unreachable: %v", err)
	}

	sock := Config{Host: "localhost", Socket: srv.Socket, User: "root", SSLMode: SSLPreferred}
	db, err = Open(ctx, sock, "", 2)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	db.Close()
	ownConnectionsAreKnown(t, rootCfg, root)
}

// A connection opened through Open is known as the process's own while it is open, on the server
// it connects to only; one opened otherwise (root) never is.
func ownConnectionsAreKnown(t *testing.T, c Config, root *sql.DB) {
	db, err := Open(context.Background(), c, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	var mine, theirs int64
	db.QueryRow("SELECT CONNECTION_ID()").Scan(&mine)
	root.QueryRow("SELECT CONNECTION_ID()").Scan(&theirs)
	other := c
	other.Port++
	if !c.IsOwn()(mine) || c.IsOwn()(theirs) || other.IsOwn()(mine) {
		t.Errorf("IsOwn: own %d %v, other client's %d %v, other server %v", mine, c.IsOwn()(mine), theirs, c.IsOwn()(theirs), other.IsOwn()(mine))
	}
	db.Close()
	if c.IsOwn()(mine) {
		t.Errorf("connection %d still counted as own after it was closed", mine)
	}
}
