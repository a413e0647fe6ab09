package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/plan"
)

func TestLogFlagsValidated(t *testing.T) {
	for _, args := range [][]string{
		{"--log-level", "loud", "status"},
		{"--log-format", "xml", "status"},
	} {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		err := app.RunContext(context.Background(), append([]string{"enginemig"}, args...))
		if outcome.CodeOf(err) != outcome.Usage || !strings.Contains(fmt.Sprint(err), args[1]) {
			t.Errorf("%v: %v (exit %d), want a usage error (%d) naming %q", args, err, outcome.CodeOf(err), outcome.Usage, args[1])
		}
	}
}

// The log goes to stderr in the chosen format and level, with the table as an attribute; apply
// --plan warns about the tables it skips before it connects, so no server is needed.
func TestLogFormatAndLevel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.json")
	p := &plan.Plan{Version: plan.FormatVersion, GeneratedAt: time.Now(), Databases: []string{"shop"}, Server: &plan.ServerInfo{},
		Tables: []plan.TablePlan{{Schema: "shop", Table: "orders", Engine: "MyISAM", Blocked: true,
			Findings: []plan.Finding{{Check: "x", Severity: plan.Blocker, Message: "no way"}}}}}
	if err := plan.WriteFile(path, p); err != nil {
		t.Fatal(err)
	}

	out, code := runCLI(t, "--log-format", "json", "apply", "--plan", path)
	if code != outcome.Refused {
		t.Fatalf("exit %d, want %d\n%s", code, outcome.Refused, out)
	}
	line, _, _ := strings.Cut(out, "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] != "WARN" || rec["table"] != "shop.orders" || rec["blockers"] != 1.0 {
		t.Fatalf("want a JSON warning naming the skipped table, got %q (%v)", line, err)
	}

	out, _ = runCLI(t, "apply", "--plan", path)
	if !strings.Contains(out, `level=WARN msg="skipping a table of the plan: it has blockers" table=shop.orders blockers=1 first="no way"`) {
		t.Fatalf("text log: %q", out)
	}
	if out, _ = runCLI(t, "--log-level", "error", "apply", "--plan", path); strings.Contains(out, "skipping") {
		t.Fatalf("--log-level error still shows warnings: %q", out)
	}
}

func TestDebugRecordsOnlyAtDebug(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogging("info", "text", &buf)
	if err != nil {
		t.Fatal(err)
	}
	l.logger.Debug("chatter")
	l.logger.Info("event")
	if strings.Contains(buf.String(), "chatter") || !strings.Contains(buf.String(), "msg=event") {
		t.Fatalf("info level: %q", buf.String())
	}
	cleared := 0
	l.sink.setBefore(func() { cleared++ })
	l.logger.Warn("look")
	if cleared != 1 {
		t.Fatalf("the progress bar was not cleared before a record")
	}
}
