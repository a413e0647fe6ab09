package migration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func TestCommandHookSeesStagesAndCanStop(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM", "INSERT INTO t SELECT seq FROM "+sandboxtest.Seq(1000))
	dir := t.TempDir()
	logFile := filepath.Join(dir, "hooks.log")
	opts := testOptions(srv, schema, "t")
	opts.Hook = CommandHook(`echo "$ENGINEMIG_STAGE $ENGINEMIG_TABLE $ENGINEMIG_ROWS_COPIED" >> `+logFile+`; [ "$ENGINEMIG_STAGE" != before-cutover ] || [ ! -e `+filepath.Join(dir, "veto")+` ]`, 0, nil)

	os.WriteFile(filepath.Join(dir, "veto"), nil, 0o600)
	_, err := Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "hook at before-cutover failed") {
		t.Fatalf("vetoing hook: %d %v", outcome.CodeOf(err), err)
	}
	if tableExists(t, db, schema, "_t_new") || engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("a vetoed migration left changes")
	}
	os.Remove(filepath.Join(dir, "veto"))
	os.Remove(logFile)
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(logFile)
	got := strings.Fields(string(b))
	var stages []string
	for i := 0; i+2 < len(got); i += 3 {
		stages = append(stages, got[i])
	}
	if strings.Join(stages, ",") != "start,before-copy,after-copy,before-cutover,success" || !strings.Contains(string(b), "after-copy t 1000") {
		t.Fatalf("hook log:\n%s", b)
	}
}
