package main

import (
	"encoding/json"
	"os"
)

// jsonOut is -json: the file every run under load is written to, as it ends.
var jsonOut string

// runReport is one conversion under load as -json writes it; its fields are the text's.
type runReport struct {
	Build string `json:"build"`
	// Rate is the load's target in requests a second; KeptMean and KeptWorst the requests
	// completed over the conversion, and in its worst second, as shares of it.
	Rate      float64 `json:"target_requests_per_second"`
	Seconds   float64 `json:"seconds"`
	KeptMean  float64 `json:"kept_mean"`
	KeptWorst float64 `json:"kept_worst_second"`
	// RequestP99Ms is a whole request's p99 during the conversion, StallMs the longest time
	// without a completed write.
	RequestP99Ms float64 `json:"request_p99_ms"`
	StallMs      float64 `json:"longest_write_stall_ms"`
	Void         bool    `json:"void"`
	// Before and During are the statements' latencies before and over the conversion;
	// StageShares and StageLatency the same per stage (enginemig: from its control socket;
	// the other tools: one "conversion" stage).
	Before       latency        `json:"before"`
	During       latency        `json:"during"`
	StageShares  []stageKept    `json:"stage_shares,omitempty"`
	StageLatency []stageLatency `json:"stage_latency,omitempty"`
}

// stageKept is one stage's throughput share.
type stageKept struct {
	Stage     string  `json:"stage"`
	Seconds   float64 `json:"seconds"`
	KeptMean  float64 `json:"kept_mean"`
	KeptWorst float64 `json:"kept_worst_second"`
}

var reports []runReport

func reportOf(r loaded, rate float64, per []stageShare, byStage []stageLatency) runReport {
	out := runReport{Build: r.build, Rate: rate, Seconds: r.took.Seconds(), KeptMean: r.mean, KeptWorst: r.worst,
		RequestP99Ms: float64(r.p99.Microseconds()) / 1000, StallMs: float64(r.stall.Microseconds()) / 1000, Void: r.void,
		Before: r.before, During: r.during, StageLatency: byStage}
	for _, s := range per {
		out.StageShares = append(out.StageShares, stageKept{Stage: s.stage, Seconds: s.took.Seconds(), KeptMean: s.mean, KeptWorst: s.worst})
	}
	return out
}

// record adds a run to the -json file, written whole again after each run so that an interrupted
// benchmark keeps what it measured.
func record(r runReport) error {
	if jsonOut == "" {
		return nil
	}
	reports = append(reports, r)
	b, err := json.MarshalIndent(map[string]any{"runs": reports}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
}
