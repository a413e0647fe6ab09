package plan

import (
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/table"
)

func init() {
	registerTable("key-too-long", Blocker,
		"an index is longer than InnoDB allows: 3072 bytes (DYNAMIC) or a key part over 767 bytes (COMPACT/REDUNDANT); errors 1071/1709",
		checkKeyTooLong)
}

// keyPartBytes is the byte length of one key part: the prefix (in characters, times the
// character set's bytes per character) or the whole column.
func keyPartBytes(c table.Column, part table.IndexColumn) int64 {
	full := maxBytes(c)
	if part.SubPart == 0 {
		return full
	}
	return min(full, part.SubPart*bytesPerChar(c))
}

// bytesPerChar is the character set's maximum bytes per character, from the column's declared
// length and its octet length (1 for binary and non-string types).
func bytesPerChar(c table.Column) int64 {
	chars, _ := typeArgs(c.ColumnType)
	if chars == 0 || c.OctetLength == 0 || !strings.Contains(c.DataType, "char") {
		return 1
	}
	return max(1, c.OctetLength/int64(chars))
}

func checkKeyTooLong(in *TableInput) []Finding {
	if in.Info == nil {
		return nil
	}
	format := shadowRowFormat(in)
	small := format == "COMPACT" || format == "REDUNDANT"
	var out []Finding
	for _, ix := range in.Info.Indexes {
		if ix.Type == "FULLTEXT" || ix.Type == "SPATIAL" {
			continue
		}
		var total int64
		for _, part := range ix.Columns {
			c, ok := in.Info.Column(part.Name)
			if !ok {
				continue
			}
			n := keyPartBytes(c, part)
			total += n
			if small && n > maxColumnPrefixSmall {
				out = append(out, newFinding("key-too-long", Blocker,
					fmt.Sprintf("index %s: key part %s is %d bytes; %s rows allow at most %d per column (error 1709)", ix.Name, c.Name, n, format, maxColumnPrefixSmall),
					fmt.Sprintf("index a prefix (e.g. %s(%d)) or let the shadow use ROW_FORMAT=DYNAMIC (drop ROW_FORMAT=%s from the table); then plan again", c.Name, maxColumnPrefixSmall/bytesPerChar(c), format)))
			}
		}
		if total > maxIndexBytesDynamic {
			out = append(out, newFinding("key-too-long", Blocker,
				fmt.Sprintf("index %s is %d bytes; InnoDB allows at most %d (error 1071)", ix.Name, total, maxIndexBytesDynamic),
				"index shorter column prefixes; then plan again"))
		}
	}
	return out
}
