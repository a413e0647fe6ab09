package plan

import (
	"fmt"
	"regexp"
	"strings"
)

func init() {
	registerTable("row-format-fixed", Warning, "ROW_FORMAT=FIXED (or another non-InnoDB format) is rejected by InnoDB in strict mode: the shadow uses the default (DYNAMIC)", checkRowFormat)
	registerTable("key-block-size", Warning, "KEY_BLOCK_SIZE would turn on InnoDB compression: the shadow drops it", checkKeyBlockSize)
	registerTable("data-index-directory", Warning, "DATA/INDEX DIRECTORY are not carried over: the InnoDB table lands in the datadir", checkDataDirectory)
	registerTable("myisam-only-options", Info, "DELAY_KEY_WRITE, PACK_KEYS, CHECKSUM, MAX_ROWS, AVG_ROW_LENGTH ... mean nothing to InnoDB and are dropped", checkMyISAMOptions)
}

var (
	keyBlockRe = regexp.MustCompile(`\bKEY_BLOCK_SIZE=(\d+)`)
	dirRe      = regexp.MustCompile(`(DATA|INDEX) DIRECTORY='([^']*)'`)
	// MyISAM options the shadow drops silently; KEY_BLOCK_SIZE and ROW_FORMAT have their own checks.
	myisamOptionRe = regexp.MustCompile(`\b(DELAY_KEY_WRITE|PACK_KEYS|CHECKSUM|MAX_ROWS|MIN_ROWS|AVG_ROW_LENGTH|PAGE_CHECKSUM|TRANSACTIONAL|INSERT_METHOD)=(\w+)`)
)

func checkRowFormat(in *TableInput) []Finding {
	m := rowFormatOptRe.FindStringSubmatch(optionsLine(in))
	if m == nil {
		return nil
	}
	switch strings.ToUpper(m[1]) {
	case "DYNAMIC", "COMPACT", "REDUNDANT", "DEFAULT":
		return nil
	}
	return []Finding{newFinding("row-format-fixed", Warning,
		fmt.Sprintf("ROW_FORMAT=%s is not an InnoDB format: the shadow uses %s", m[1], shadowRowFormat(in)),
		"nothing to do (handled); the table's declared ROW_FORMAT changes")}
}

func checkKeyBlockSize(in *TableInput) []Finding {
	m := keyBlockRe.FindStringSubmatch(optionsLine(in))
	if m == nil {
		return nil
	}
	return []Finding{newFinding("key-block-size", Warning,
		fmt.Sprintf("KEY_BLOCK_SIZE=%s would make the InnoDB table ROW_FORMAT=COMPRESSED: the shadow drops it", m[1]),
		"nothing to do (handled); add compression later deliberately if wanted")}
}

func checkDataDirectory(in *TableInput) []Finding {
	var out []Finding
	for _, m := range dirRe.FindAllStringSubmatch(optionsLine(in), -1) {
		out = append(out, newFinding("data-index-directory", Warning,
			fmt.Sprintf("%s DIRECTORY='%s' is not carried over: the InnoDB table is created in the datadir (%s)", m[1], m[2], dataDir(in)),
			"make sure the datadir's file system has room for the table (see the disk finding)"))
	}
	return out
}

func dataDir(in *TableInput) string {
	if in.Server == nil || in.Server.Var("datadir") == "" {
		return "the server's datadir"
	}
	return in.Server.Var("datadir")
}

func checkMyISAMOptions(in *TableInput) []Finding {
	ms := myisamOptionRe.FindAllStringSubmatch(optionsLine(in), -1)
	if len(ms) == 0 || isMerge(in) {
		return nil
	}
	var opts []string
	delayKeyWrite := false
	for _, m := range ms {
		opts = append(opts, m[1]+"="+m[2])
		if m[1] == "DELAY_KEY_WRITE" && m[2] == "1" {
			delayKeyWrite = true
		}
	}
	remedy := "nothing to do (handled)"
	if delayKeyWrite {
		remedy = "DELAY_KEY_WRITE=1 keeps index changes in memory: run FLUSH TABLES on the table right before apply starts"
	}
	return []Finding{newFinding("myisam-only-options", Info,
		"MyISAM-only options dropped from the shadow: "+strings.Join(opts, " "), remedy)}
}
