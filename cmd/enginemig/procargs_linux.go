package main

import (
	"os"
	"strings"
	"unsafe"
)

// overwritePasswordArgs hides a --password value from `ps`, like the mysql client: it writes 'x' over the password bytes in the original argv memory, which
// is what /proc/<pid>/cmdline (and so ps) shows. os.Args strings share that memory on Linux.
func overwritePasswordArgs() {
	for i, a := range os.Args {
		var secret string
		switch {
		case strings.HasPrefix(a, "--password="):
			secret = a[len("--password="):]
		case a == "--password" && i+1 < len(os.Args):
			secret = os.Args[i+1]
		default:
			continue
		}
		if len(secret) == 0 {
			continue
		}
		b := unsafe.Slice(unsafe.StringData(secret), len(secret))
		for j := range b {
			b[j] = 'x'
		}
	}
}
