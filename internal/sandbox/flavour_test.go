package sandbox_test

import (
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Every flavour starts, answers, writes a ROW binlog, and runs as the version its name says; MySQL
// with its own defaults (GTID on). The portable row generator gives 1..n on each.
func TestFlavoursStart(t *testing.T) {
	for _, f := range sandbox.Flavours() {
		t.Run(string(f), func(t *testing.T) {
			s := sandboxtest.ForFlavour(t, f, sandbox.Options{})
			if s.Flavour() != f {
				t.Fatalf("server flavour %s", s.Flavour())
			}
			db, err := s.Open("")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var version, format, image, logBin string
			if err := db.QueryRow("SELECT VERSION(), @@binlog_format, @@binlog_row_image, @@log_bin").Scan(&version, &format, &image, &logBin); err != nil {
				t.Fatal(err)
			}
			want := map[sandbox.Flavour]string{sandbox.MariaDB1011: "10.11.", sandbox.MariaDB118: "11.8.", sandbox.MySQL97: "9.7."}[f]
			if !strings.HasPrefix(version, want) || strings.Contains(version, "MariaDB") == f.MySQL() {
				t.Fatalf("%s runs %s", f, version)
			}
			if format != "ROW" || image != "FULL" || logBin != "1" {
				t.Fatalf("format=%s image=%s log_bin=%s", format, image, logBin)
			}
			if f.MySQL() {
				var gtid, enforce, meta string
				if err := db.QueryRow("SELECT @@gtid_mode, @@enforce_gtid_consistency, @@binlog_row_metadata").Scan(&gtid, &enforce, &meta); err != nil {
					t.Fatal(err)
				}
				if gtid != "ON" || enforce != "ON" || meta != "MINIMAL" {
					t.Fatalf("MySQL defaults changed: gtid_mode=%s enforce_gtid_consistency=%s binlog_row_metadata=%s", gtid, enforce, meta)
				}
			}
			var n, sum int64
			if err := db.QueryRow("SELECT COUNT(*), SUM(seq) FROM "+sandboxtest.Seq(12345)).Scan(&n, &sum); err != nil {
				t.Fatal(err)
			}
			if n != 12345 || sum != 12345*12346/2 {
				t.Fatalf("Seq(12345): %d rows, sum %d", n, sum)
			}
			t.Logf("%s: %s", f, version)
		})
	}
}
