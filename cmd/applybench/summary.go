package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// repeat is -repeat: runs of every build at each load level.
var repeat int

// loaded is what one conversion under load cost the application.
type loaded struct {
	build       string
	took        time.Duration
	mean, worst float64 // shares of the target rate over the conversion, and in its worst second
	p99, stall  time.Duration
	void        bool    // the load missed its target before the conversion
	before      latency // the application's statements before the conversion
	during      latency // and over it
}

// summarize prints, for each build in order, the median of its runs' figures and every run's
// share, leaving out runs whose level was void.
func summarize(runs []loaded, builds []build) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  medians over the runs that were not void:\n")
	for _, bd := range builds {
		var mean, worst, took, p99, stall, readP99, writeP99 []float64
		var each []string
		void := 0
		for _, r := range runs {
			if r.build != bd.name {
				continue
			}
			if r.void {
				void++
				continue
			}
			mean, worst = append(mean, r.mean), append(worst, r.worst)
			took, p99, stall = append(took, r.took.Seconds()), append(p99, r.p99.Seconds()), append(stall, r.stall.Seconds())
			readP99, writeP99 = append(readP99, r.during.ReadP99Ms), append(writeP99, r.during.WriteP99Ms)
			each = append(each, fmt.Sprintf("%.0f%% in %.1fs", 100*r.mean, r.took.Seconds()))
		}
		if len(mean) == 0 {
			fmt.Fprintf(&b, "    %s: every run void (%d)\n", bd.name, void)
			continue
		}
		fmt.Fprintf(&b, "    %s: application %.0f%% (worst second %.0f%%), wall %.1fs, p99 %s (reads %s, writes %s), stall %s; %d run(s): %s",
			bd.name, 100*median(mean), 100*median(worst), median(took), seconds(median(p99)), ms(median(readP99)), ms(median(writeP99)),
			seconds(median(stall)), len(mean), strings.Join(each, ", "))
		if void > 0 {
			fmt.Fprintf(&b, "; %d void", void)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func seconds(f float64) time.Duration {
	return time.Duration(f * float64(time.Second)).Round(100 * time.Microsecond)
}
