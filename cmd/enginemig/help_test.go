package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// urfave/cli shows the first back-quoted word of a flag's usage as the flag's placeholder
// (`--plan enginemig plan --out`): a back-quoted text must be a placeholder name, like PATH.
var placeholder = regexp.MustCompile("^[A-Z][A-Z_]*$")

func TestHelpReadsCleanly(t *testing.T) {
	app := newApp()
	check := func(where string, flags []cli.Flag) {
		for _, f := range flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok {
				continue
			}
			usage := df.GetUsage()
			if i := strings.Index(usage, "`"); i >= 0 {
				j := strings.Index(usage[i+1:], "`")
				if j < 0 || !placeholder.MatchString(usage[i+1:i+1+j]) {
					t.Errorf("%s --%s: back-quoted text %q in its usage would become the placeholder in --help", where, f.Names()[0], usage)
				}
			}
		}
	}
	check("enginemig", app.Flags)
	for _, c := range app.Commands {
		check(c.Name, c.Flags)
		for _, sc := range c.Subcommands {
			check(c.Name+" "+sc.Name, sc.Flags)
		}
	}
	// And the rendered help: every command's renders, and apply's three once-garbled flags read
	// "--flag value".
	for _, c := range app.Commands {
		if out, code := runCLI(t, c.Name, "--help"); code != 0 || !strings.Contains(out, "USAGE:") {
			t.Errorf("%s --help: exit %d\n%s", c.Name, code, out)
		}
	}
	out, _ := runCLI(t, "apply", "--help")
	for _, f := range []string{"--plan value", "--control-socket value", "--postpone-cutover-file value"} {
		if !strings.Contains(out, f) {
			t.Errorf("apply --help does not show %q", f)
		}
	}
}

// One set of short flags for every command: -D or -d for the database, -t for the table(s), -o
// for the output format (the mysql client's letters; -h stays help, -H is the host).
func TestShortFlagsAreTheSameEverywhere(t *testing.T) {
	for _, c := range newApp().Commands {
		for _, f := range c.Flags {
			names := strings.Join(f.Names(), ",")
			switch f.Names()[0] {
			case "database":
				if !strings.Contains(names, ",D") || !strings.Contains(names, ",d") {
					t.Errorf("%s --database: %s, want -D and -d", c.Name, names)
				}
			case "output":
				if !strings.Contains(names, ",o") {
					t.Errorf("%s --output: %s, want -o", c.Name, names)
				}
			case "table", "tables":
				if !strings.Contains(names, ",t") {
					t.Errorf("%s --%s: %s, want -t", c.Name, f.Names()[0], names)
				}
			}
		}
	}
}

// Every line of every command's --help fits a terminal: at most 250 characters.
func TestHelpLinesFit(t *testing.T) {
	const most = 250
	check := func(args ...string) {
		out, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, line := range strings.Split(out, "\n") {
			if n := len([]rune(line)); n > most {
				t.Errorf("%s: a line of %d characters (at most %d): %s", strings.Join(args, " "), n, most, line)
			}
		}
	}
	check("--help")
	for _, c := range newApp().Commands {
		check(c.Name, "--help")
		for _, sc := range c.Subcommands {
			check(c.Name, sc.Name, "--help")
		}
	}
}
