package demo

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
)

func TestNarrate(t *testing.T) {
	var buf bytes.Buffer
	l := narrate(&buf, "apply").With(slog.String("table", "game.horses"))
	l.Debug("not told")
	l.Info("cut-over done", slog.Int("attempts", 1))
	l.WithGroup("copy").Warn("copy throttled", slog.String("reason", "replica r1 lags 2s"), slog.Any("error", errors.New("x")))
	l.Info("copied", slog.Int("rows", 5))
	want := "  apply: cut-over done table=game.horses attempts=1\n" +
		"  apply: WARN: copy throttled table=game.horses copy.reason=\"replica r1 lags 2s\" copy.error=x\n" +
		"  apply: copied table=game.horses rows=5\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
