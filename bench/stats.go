package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in microseconds from 1 µs to 5 minutes (a report scan
// on a big MyISAM table can wait that long) with 3 significant digits, i.e. 0.1% resolution.
const (
	histMinMicros = 1
	histMaxMicros = int64(5 * time.Minute / time.Microsecond)
	histSigFigs   = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

// record adds one latency; values past the top are clamped rather than lost, so the count stays right.
func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < histMinMicros {
		us = histMinMicros
	}
	if us > histMaxMicros {
		us = histMaxMicros
	}
	_ = h.RecordValue(us) // cannot fail: us is within the bounds
}

// Stats are one statement type's numbers in one step (or the step's total).
type Stats struct {
	Name   string  `json:"name"`
	Count  int64   `json:"count"`
	Errors int64   `json:"errors"`
	QPS    float64 `json:"qps"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	// FirstError is one error message, so a failing statement explains itself.
	FirstError string `json:"first_error,omitempty"`
}

func statsOf(name string, h *hdrhistogram.Histogram, errors int64, firstErr string, seconds float64) Stats {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	s := Stats{Name: name, Count: h.TotalCount(), Errors: errors, FirstError: firstErr}
	if seconds > 0 {
		s.QPS = float64(s.Count) / seconds
	}
	if s.Count > 0 {
		s.P50 = ms(h.ValueAtQuantile(50))
		s.P95 = ms(h.ValueAtQuantile(95))
		s.P99 = ms(h.ValueAtQuantile(99))
		s.Max = ms(h.Max())
	}
	return s
}
