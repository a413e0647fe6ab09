package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Names with backticks, spaces, unicode and SQL keywords, in a database whose name has them too,
// with columns named the same way: apply and rollback work under load and lose nothing.
func TestOddIdentifiersEndToEnd(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "my db `x` é")
	const tbl = "sélect `x` order"
	l, err := ackload.Create(context.Background(), e.app, schema, tbl, ackload.Config{Writers: 3, RowsPerWriter: 2000,
		Seed: 5, Pause: time.Millisecond, Columns: [4]string{"id`", "order", "sé lect", "`b` from"}})
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Start()
	defer stop()
	code, out := e.run(t, "apply", "--database", schema, "--table", tbl, "--chunk-time", "1ms", "--no-progress")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if e.engine(schema, tbl) != "InnoDB" || e.engine(schema, "_"+tbl+"_old") != "MyISAM" {
		t.Fatalf("after apply: %q is %q, old %q", tbl, e.engine(schema, tbl), e.engine(schema, "_"+tbl+"_old"))
	}
	time.Sleep(200 * time.Millisecond)
	code, out = e.run(t, "rollback", "--database", schema, "--table", tbl)
	if code != 0 {
		t.Fatalf("rollback: exit %d\n%s", code, out)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	if e.engine(schema, tbl) != "MyISAM" {
		t.Fatalf("after rollback %q is %q", tbl, e.engine(schema, tbl))
	}
	checkLoad(t, e.app, l, schema, tbl, false)

	// DDL on such a table must be noticed too, also when its name has to be written with doubled
	// backticks in SQL (TRUNCATE writes no row events: only the statement text shows it).
	t.Run("TRUNCATE during the copy", func(t *testing.T) {
		const tbl2 = "t `2` order"
		sandboxtest.MustExec(t, e.app, ackload.DDL(dbconn.QualifiedName(schema, tbl2), [4]string{}),
			"INSERT INTO "+dbconn.QualifiedName(schema, tbl2)+" (id, v) SELECT seq, seq FROM "+dbconn.QuoteIdent(schema)+".seq_1_to_60000")
		p := e.start(t, "apply", "--database", schema, "--table", tbl2, "--chunk-time", "1ms", "--no-progress", "--skip-verify")
		e.waitStage(t, p, schema, tbl2, func(s string) bool { return s == "copy" })
		sandboxtest.MustExec(t, e.app, "TRUNCATE TABLE "+dbconn.QualifiedName(schema, tbl2))
		code, out := p.wait(t, time.Minute)
		var n int
		e.app.QueryRow("SELECT COUNT(*) FROM " + dbconn.QualifiedName(schema, tbl2)).Scan(&n)
		if code != int(outcome.FailedSafe) || !strings.Contains(out, "changed by DDL") {
			t.Fatalf("TRUNCATE of %q during the copy: exit %d, %d rows in the table now (want exit 6, DDL noticed)\n%s", tbl2, code, n, out)
		}
	})
}

// A user with exactly the privileges of docs/reference.md runs a full migration and a rollback.
func TestReadmePrivilegesSuffice(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "grants")
	root, err := e.srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sandboxtest.MustExec(t, root,
		"CREATE USER 'enginemig'@'127.0.0.1' IDENTIFIED BY 'pw-7'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, LOCK TABLES ON `grants`.* TO 'enginemig'@'127.0.0.1'",
		"GRANT CREATE TEMPORARY TABLES ON `grants`.* TO 'enginemig'@'127.0.0.1'",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'enginemig'@'127.0.0.1'",
		"GRANT ALL ON `_enginemig`.* TO 'enginemig'@'127.0.0.1'",
		"GRANT ALL ON `_enginemig_bench`.* TO 'enginemig'@'127.0.0.1'",
		"GRANT PROCESS ON *.* TO 'enginemig'@'127.0.0.1'",
		"GRANT SELECT ON performance_schema.* TO 'enginemig'@'127.0.0.1'")
	t.Cleanup(func() { e.app.Exec("DROP USER 'enginemig'@'127.0.0.1'") })
	l, stop := startLoad(t, e, schema, "t", 3, 3000)
	as := func(args ...string) (int, string) {
		full := append([]string{args[0]}, e.conn...)
		for i, a := range full {
			if a == "root" && full[i-1] == "--user" {
				full[i] = "enginemig"
			}
		}
		full = append(full, "--password", "pw-7")
		return e.runRaw(t, append(full, args[1:]...)...)
	}
	if code, out := as("plan", "--database", schema); code != 0 && code != int(outcome.Refused) {
		t.Fatalf("plan as the restricted user: exit %d\n%s", code, out)
	} else if strings.Contains(out, "privileges") && strings.Contains(out, "lacks") {
		t.Fatalf("plan says docs/reference.md's grants are not enough:\n%s", out)
	}
	if code, out := as("apply", "--database", schema, "--table", "t", "--chunk-time", "1ms", "--no-progress"); code != 0 {
		t.Fatalf("apply as the restricted user: exit %d\n%s", code, out)
	}
	time.Sleep(200 * time.Millisecond)
	if code, out := as("rollback", "--database", schema, "--table", "t"); code != 0 {
		t.Fatalf("rollback as the restricted user: exit %d\n%s", code, out)
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	checkLoad(t, e.app, l, schema, "t", false)
}

// runRaw runs the binary with exactly these arguments.
func (e *faultEnv) runRaw(t *testing.T, args ...string) (int, string) {
	t.Helper()
	saved := e.conn
	e.conn = nil
	defer func() { e.conn = saved }()
	return e.run(t, args...)
}

// certPair writes a self-signed CA and a server certificate it signed into dir.
func certPair(t *testing.T, dir, prefix string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: prefix + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sandbox"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"sandbox.invalid"}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, prefix+"-"+name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER),
		write("server-key.pem", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(srvKey))
}

// TLS: a server with a self-signed certificate and an account that may only connect over TLS.
// REQUIRED and VERIFY_CA (right CA) run a whole migration, binlog stream included; VERIFY_CA with
// another CA and DISABLED cannot connect (exit 3).
func TestTLSModes(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := certPair(t, dir, "good")
	otherCA, _, _ := certPair(t, dir, "other")
	srv := sandboxtest.ForTest(t, sandbox.Options{ExtraArgs: []string{"--ssl-cert=" + cert, "--ssl-key=" + key, "--ssl-ca=" + ca}})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE USER 'sec'@'127.0.0.1' IDENTIFIED BY 'tls-pw' REQUIRE SSL",
		"GRANT ALL ON *.* TO 'sec'@'127.0.0.1'",
		ackload.DDL(dbconn.QualifiedName(schema, "a"), [4]string{}), ackload.DDL(dbconn.QualifiedName(schema, "b"), [4]string{}),
		"INSERT INTO "+dbconn.QualifiedName(schema, "a")+" (id, v, s) SELECT seq, seq, 'x' FROM seq_1_to_3000",
		"INSERT INTO "+dbconn.QualifiedName(schema, "b")+" (id, v, s) SELECT seq, seq, 'y' FROM seq_1_to_3000")
	var have string
	db.QueryRow("SELECT @@have_ssl").Scan(&have)
	if have != "YES" {
		t.Fatalf("the server did not enable TLS (have_ssl=%s):\n%s", have, srv.ErrorLogTail(10))
	}
	empty := filepath.Join(dir, "my.cnf")
	os.WriteFile(empty, nil, 0o600)
	e := &faultEnv{srv: srv, bin: buildBinary(t), app: db}
	conn := func(mode string, extra ...string) []string {
		return append([]string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "sec",
			"--password", "tls-pw", "--ssl-mode", mode}, extra...)
	}
	for _, c := range []struct {
		name  string
		args  []string
		table string
		want  outcome.Code
	}{
		{"REQUIRED", conn("REQUIRED"), "a", outcome.OK},
		{"VERIFY_CA with another CA", conn("VERIFY_CA", "--ssl-ca", otherCA), "b", outcome.Connection},
		{"VERIFY_IDENTITY (certificate is for another name)", conn("VERIFY_IDENTITY", "--ssl-ca", ca), "b", outcome.Connection},
		{"DISABLED for a REQUIRE SSL account", conn("DISABLED"), "b", outcome.Connection},
		{"VERIFY_CA", conn("VERIFY_CA", "--ssl-ca", ca), "b", outcome.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"apply"}, c.args...)
			code, out := e.runRaw(t, append(args, "--database", schema, "--table", c.table, "--no-progress")...)
			if code != int(c.want) {
				t.Fatalf("exit %d, want %d\n%s", code, c.want, out)
			}
			if strings.Contains(out, "tls-pw") {
				t.Fatal("password in the output")
			}
			if c.want == outcome.OK && e.engine(schema, c.table) != "InnoDB" {
				t.Fatalf("%s not converted", c.table)
			}
			if c.want != outcome.OK && e.engine(schema, c.table) != "MyISAM" {
				t.Fatalf("%s changed although the connection failed", c.table)
			}
			t.Log(lastLine(out))
		})
	}
}

// An account without a password, as staging servers have, given as an empty standard input to
// --ask-password (what the Ansible role does with enginemig_password: ""): no password is sent
// and the command connects.
func TestEmptyPasswordOnStandardInput(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, input := range []string{"", "\n"} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString(input)
		w.Close()
		stdin := os.Stdin
		os.Stdin = r
		out, code := runCLI(t, "status", "--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port),
			"--user", "root", "--ssl-mode", "DISABLED", "--ask-password", "--output", "json")
		os.Stdin = stdin
		r.Close()
		if code != outcome.OK {
			t.Errorf("standard input %q: exit %d\n%s", input, code, out)
		}
	}
}
