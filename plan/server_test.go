package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// TestMisconfiguredServer plans against a second server with every setting the server checks
// look for set the wrong way; the shared server (set up as enginemig needs) is the negative case.
func TestMisconfiguredServer(t *testing.T) {
	bad := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "STATEMENT", BufferPool: "8M", ExtraArgs: []string{
		"--binlog-row-metadata=MINIMAL", "--innodb-file-per-table=OFF", "--innodb-strict-mode=OFF",
		"--innodb-force-primary-key=ON", "--innodb-flush-log-at-trx-commit=2", "--myisam-use-mmap=1",
	}})
	badSchema, badDB := sandboxtest.FreshDatabase(t, bad)
	sandboxtest.MustExec(t, badDB,
		"CREATE TABLE hit_keyless (a INT, b INT) ENGINE=MyISAM",
		"CREATE TABLE ok_unique (a INT NOT NULL, UNIQUE KEY (a)) ENGINE=MyISAM",
		// ~10 MiB projected InnoDB size: more than the 8 MiB buffer pool.
		"CREATE TABLE ok_big (id INT PRIMARY KEY, pad CHAR(60) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO ok_big SELECT seq, 'x' FROM seq_1_to_120000")
	goodSchema, goodDB := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, goodDB, "CREATE TABLE ok_big (id INT PRIMARY KEY, pad CHAR(60) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO ok_big SELECT seq, 'x' FROM seq_1_to_120000")

	badPlan := inspect(t, badDB, Options{Databases: []string{badSchema}, TestCompile: true})
	goodPlan := inspect(t, goodDB, Options{Databases: []string{goodSchema}, TestCompile: true})

	for _, tc := range []struct {
		id       string
		sev      Severity
		onBad    bool
		onGood   bool
		contains string
	}{
		{"binlog", Info, true, false, "captures changes with triggers (binlog_format=STATEMENT"},
		{"binlog-metadata", Info, true, false, "MINIMAL"},
		{"file-per-table", Warning, true, false, "ibdata1"},
		{"strict-mode", Info, true, false, "innodb_strict_mode=OFF"},
		{"buffer-pool", Warning, true, false, "innodb_buffer_pool_size"},
		{"durability", Info, false, true, "innodb_flush_log_at_trx_commit=1"},
		{"statement-binlog", Warning, true, false, "binlog_format=STATEMENT: a write into a MyISAM table that is interrupted"},
		{"myisam-mmap", Info, false, true, "myisam_use_mmap=OFF"},
	} {
		f, found := hasCheck(badPlan.Findings, tc.id)
		if found != tc.onBad {
			t.Errorf("%s on misconfigured server: found=%v want %v (%+v)", tc.id, found, tc.onBad, badPlan.Findings)
		}
		if g, gfound := hasCheck(goodPlan.Findings, tc.id); gfound != tc.onGood {
			t.Errorf("%s on good server: found=%v want %v (%+v)", tc.id, gfound, tc.onGood, g)
		} else if gfound {
			f = g
		}
		if (found || tc.onGood) && (f.Severity != tc.sev || !strings.Contains(f.Message, tc.contains)) {
			t.Errorf("%s: got %+v, want severity %s and %q in the message", tc.id, f, tc.sev, tc.contains)
		}
	}
	if !badPlan.HasBlockers() {
		t.Error("the keyless table's blocker must make the plan blocked")
	}
	// innodb_force_primary_key accepts the keyless table's InnoDB copy: apply gives it a primary
	// key (the test-compile creates it with one). It is blocked because the STATEMENT binlog
	// leaves trigger capture, which cannot sync rows without a key.
	keyless, _ := badPlan.Table(badSchema, "hit_keyless")
	if f, found := hasCheck(keyless.Findings, "require-pk-setting"); found {
		t.Errorf("hit_keyless: the added primary key satisfies innodb_force_primary_key, got %+v", f)
	}
	if f, found := hasCheck(keyless.Findings, "no-usable-key"); !found || f.Severity != Blocker {
		t.Errorf("hit_keyless: want the no-usable-key blocker under trigger capture, got %+v", keyless.Findings)
	}
	unique, _ := badPlan.Table(badSchema, "ok_unique")
	if _, found := hasCheck(unique.Findings, "require-pk-setting"); found {
		t.Errorf("ok_unique: MariaDB promotes a unique NOT NULL key, no require-pk-setting expected: %+v", unique.Findings)
	}

	// CheckServer is what apply's preflight calls: same server findings, without the capacity ones.
	// With --capture binlog, a STATEMENT binlog blocks.
	_, fs, err := CheckServer(context.Background(), badDB, CaptureBinlog, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := hasCheck(fs, "binlog"); !ok || len(Blockers(fs)) == 0 || !strings.Contains(f.Message, "binlog_format=STATEMENT") {
		t.Errorf("CheckServer: want binlog blocker, got %+v %+v", f, fs)
	}
}
