package plan

import (
	"fmt"
	"regexp"
	"strings"
)

func init() {
	registerTable("row-too-large", Blocker,
		"the InnoDB row would be over half a page (8126 bytes at 16 KiB pages; error 1118); estimated from the columns, confirmed by test-compile",
		checkRowSize)
}

var rowFormatOptRe = regexp.MustCompile(`ROW_FORMAT=(\w+)`)

// shadowRowFormat is the row format the shadow will get: the source's when InnoDB knows it,
// else the server's innodb_default_row_format (table.Shadow makes the same choice).
func shadowRowFormat(in *TableInput) string {
	if m := rowFormatOptRe.FindStringSubmatch(optionsLine(in)); m != nil {
		switch f := strings.ToUpper(m[1]); f {
		case "DYNAMIC", "COMPACT", "REDUNDANT":
			return f
		}
	}
	if in.Server != nil && in.Server.Var("innodb_default_row_format") != "" {
		return strings.ToUpper(in.Server.Var("innodb_default_row_format"))
	}
	return "DYNAMIC"
}

// optionsLine is the table-options line of SHOW CREATE TABLE (the one that closes the columns).
func optionsLine(in *TableInput) string {
	if in.Info == nil {
		return ""
	}
	for _, l := range strings.Split(in.Info.CreateSQL, "\n") {
		if strings.HasPrefix(l, ")") {
			return l
		}
	}
	return ""
}

func pageSize(in *TableInput) int64 {
	if in.Server == nil {
		return 16384
	}
	return in.Server.VarInt("innodb_page_size", 16384)
}

func checkRowSize(in *TableInput) []Finding {
	if in.Info == nil || len(in.Info.Columns) == 0 {
		return nil
	}
	est := inlineRowBytes(in.Info.Columns, shadowRowFormat(in))
	limit := maxRecordBytes(pageSize(in))
	if est <= limit {
		return nil
	}
	return []Finding{newFinding("row-too-large", Blocker,
		fmt.Sprintf("estimated worst-case InnoDB row size %d bytes exceeds the %d-byte limit for %s rows (error 1118)", est, limit, shadowRowFormat(in)),
		"turn wide CHAR/VARCHAR(<=255 bytes) columns into longer VARCHAR, TEXT or BLOB (stored off-page) or split the table; then plan again")}
}
