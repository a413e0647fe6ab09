package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleReport() Report {
	side := func(label string, qps ...float64) Result {
		r := Result{Target: Target{Label: label}, Engine: label}
		for i, n := range []int{1, 4, 16, 64} {
			r.Steps = append(r.Steps, Step{Threads: n, Seconds: 1, Total: Stats{Count: int64(qps[i]), QPS: qps[i], P99: 1000 / qps[i] * float64(n)}})
		}
		return r
	}
	rep := Report{Mode: "scratch", Schema: "game", Table: "players <x>", Mix: DefaultMix(), Threads: []int{1, 4, 16, 64}, Seconds: 1,
		Results: []Result{side("MyISAM", 3000, 5000, 4000, 3500), side("InnoDB", 2500, 6000, 9000, 9500)}}
	rep.compare()
	return rep
}

func TestChartFilesAreSelfContained(t *testing.T) {
	dir := t.TempDir()
	rep := sampleReport()
	for _, name := range []string{"c.html", "c.svg", "c.png"} {
		if err := WriteChart(filepath.Join(dir, name), rep); err != nil {
			t.Fatal(err)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "c.html"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	if !strings.Contains(s, "<svg") || !strings.Contains(s, "Throughput") || !strings.Contains(s, "InnoDB") {
		t.Fatal("the page has no chart")
	}
	// Offline: nothing may be fetched when the page opens.
	for _, bad := range []string{"<script", "src=\"http", "href=\"http", "@import", "url(http"} {
		if strings.Contains(s, bad) {
			t.Fatalf("the page loads something from outside: %q", bad)
		}
	}
	if strings.Contains(s, "players <x>") {
		t.Fatal("the table name is not HTML-escaped")
	}
	f, err := os.Open(filepath.Join(dir, "c.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("png: %v %v", err, img.Bounds())
	}
	if err := WriteChart(filepath.Join(dir, "c.pdf"), rep); err == nil {
		t.Fatal("an unknown chart format must be refused")
	}
}
