package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runPTOSC converts the table with pt-online-schema-change (percona-toolkit), as a DBA would.
func runPTOSC(port int, table string) error {
	cmd := exec.Command(ptOSC, "--alter", "ENGINE=InnoDB", "--execute", "--no-check-unique-key-change",
		fmt.Sprintf("h=127.0.0.1,P=%d,u=root,D=game,t=%s", port, table))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pt-online-schema-change: %v\n%s", err, out)
	}
	return nil
}

// runGhost converts the table with gh-ost (-gh-ost), run on the primary itself as its own
// replica: it reads the ROW binlog, so the sandbox writes one with full row images. MariaDB has
// no metadata-lock instrument on by default, which gh-ost's cut-over check wants; it is skipped,
// as a MariaDB user would have to.
func runGhost(port int, table string) error {
	dir, err := os.MkdirTemp("", "applybench-ghost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"--host", "127.0.0.1", "--port", fmt.Sprint(port), "--user", "root", "--password", "",
		"--database", "game", "--table", table, "--alter", "ENGINE=InnoDB",
		"--allow-on-master", "--assume-rbr", "--execute", "--initially-drop-ghost-table", "--initially-drop-old-table",
		"--ok-to-drop-table", "--skip-metadata-lock-check", "--serve-socket-file", filepath.Join(dir, "gh-ost.sock"), "--verbose=false"}
	cmd := exec.Command(ghostBin, append(args, strings.Fields(ghostArgs)...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("gh-ost: %v\n%s", err, out)
	}
	return nil
}
