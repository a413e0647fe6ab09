package dbconn

import (
	"context"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A host's session limits (a statement time limit set globally and per account, a short idle
// limit) do not reach enginemig's sessions; an application's session on the same account keeps
// them (which shows they are in force).
func TestSessionsLiftTheHostsLimits(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	mariaDB := !srv.Flavour().MySQL()
	limit, sleep := "SET GLOBAL max_execution_time = 100", "SELECT SLEEP(0.3) FROM DUAL WHERE 1"
	if mariaDB {
		limit = "SET GLOBAL max_statement_time = 0.1"
	}
	root, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sandboxtest.MustExec(t, root, "CREATE DATABASE d", "CREATE USER host@'%' IDENTIFIED BY 'pw'", "GRANT ALL ON d.* TO host@'%'",
		limit, "SET GLOBAL wait_timeout = 60")
	if mariaDB { // a per-account limit too, as shared hosts grant it
		sandboxtest.MustExec(t, root, "GRANT USAGE ON *.* TO host@'%' WITH MAX_STATEMENT_TIME 0.1")
	}
	c := Config{Host: "127.0.0.1", Port: srv.Port, User: "host", Password: "pw", SSLMode: SSLDisabled}
	ctx := context.Background()
	app, err := OpenApplication(ctx, c, "d", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	var slept int
	if err := app.QueryRow(sleep).Scan(&slept); err == nil && slept == 0 {
		t.Fatal("the application's session ran past the host's statement limit: the limit is not in force, the test proves nothing")
	}
	db, err := Open(ctx, c, "d", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(sleep).Scan(&slept); err != nil || slept != 0 {
		t.Fatalf("enginemig's session was stopped by the host's statement limit: %v (SLEEP returned %d)", err, slept)
	}
	var wait int
	if err := db.QueryRow("SELECT @@SESSION.wait_timeout").Scan(&wait); err != nil || wait < idleLimit {
		t.Fatalf("enginemig's session keeps the host's idle limit: %d (%v)", wait, err)
	}
}
