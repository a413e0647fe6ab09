package sandbox_test

import (
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func TestStartAnswersWithBinlogRow(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	db, err := s.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var format, image, meta, logBin string
	if err := db.QueryRow("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@log_bin").Scan(&format, &image, &meta, &logBin); err != nil {
		t.Fatal(err)
	}
	wantMeta := "FULL"
	if s.Flavour().MySQL() {
		wantMeta = "MINIMAL" // MySQL runs with its defaults
	}
	if format != "ROW" || image != "FULL" || meta != wantMeta || logBin != "1" {
		t.Fatalf("got format=%s image=%s metadata=%s log_bin=%s", format, image, meta, logBin)
	}
}

func TestBinlogOff(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"})
	db, _ := s.Open("")
	defer db.Close()
	var logBin string
	if err := db.QueryRow("SELECT @@log_bin").Scan(&logBin); err != nil {
		t.Fatal(err)
	}
	if logBin != "0" {
		t.Fatalf("log_bin=%s, want 0", logBin)
	}
}
