package realapp

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The CPU each part of the test used while apply ran: on a 2-core machine the wiki's PHP, its
// server and enginemig share the cores, and a page view slows when another part takes one
// (#39's p99 goal).

// tick is the kernel's clock tick that /proc reports CPU time in (USER_HZ, 100 on Linux).
const tick = 10 * time.Millisecond

// procCPU is the CPU time (user and system) process pid has used so far; 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its closing parenthesis start
	// with the state (field 3), so utime and stime (fields 14 and 15) are the 12th and 13th.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * tick
}

// machineCPU is the CPU time all cores have spent busy so far (everything but idle and iowait).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * tick
}

// cpuUse is a snapshot of the server's and the machine's CPU time.
type cpuUse struct{ server, machine time.Duration }

func cpuNow(serverPid int) cpuUse { return cpuUse{procCPU(serverPid), machineCPU()} }

// cpuReport says what the server, enginemig and everything else used between two snapshots.
func cpuReport(from, to cpuUse, enginemig, wall time.Duration) string {
	server, machine := to.server-from.server, to.machine-from.machine
	rest := machine - server - enginemig
	pct := func(d time.Duration) string { return fmt.Sprintf("%.0f %%", 100*d.Seconds()/wall.Seconds()) }
	return fmt.Sprintf("server %v (%s of a core), enginemig %v (%s), the rest (PHP, the clients) %v (%s); the machine %v busy of %v",
		server.Round(10*time.Millisecond), pct(server), enginemig.Round(10*time.Millisecond), pct(enginemig),
		rest.Round(10*time.Millisecond), pct(rest), machine.Round(10*time.Millisecond), (time.Duration(runtime.NumCPU()) * wall).Round(10*time.Millisecond))
}
