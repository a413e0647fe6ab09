package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The CPU figures put a loaded run beside what the load leaves of the machine. They are not a
// floor: busy time includes threads that spin or wake without work, and shrinks under pressure
// (an example: docs/bench/constants.md, "Measurements behind the code's constants").

// userHZ is the clock tick of /proc's CPU times (USER_HZ, 100 on Linux whatever the kernel's HZ).
const userHZ = 100

// machineCPU is the machine's busy and total CPU time so far, from /proc/stat.
type machineCPU struct{ busy, total time.Duration }

func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var m machineCPU
	for i, s := range f[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return machineCPU{}, err
		}
		d := time.Duration(n) * time.Second / userHZ
		m.total += d
		if i != 3 && i != 4 { // idle, iowait
			m.busy += d
		}
	}
	return m, nil
}

// busyCores is how many cores were busy on average between a and b.
func busyCores(a, b machineCPU, cores int) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(cores) * float64(b.busy-a.busy) / float64(b.total-a.total)
}

// processCPU is a process's user and system time so far, from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces; the fields after it are fixed.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	var sum time.Duration
	for _, s := range f[11:13] { // utime, stime
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		sum += time.Duration(n) * time.Second / userHZ
	}
	return sum, nil
}
