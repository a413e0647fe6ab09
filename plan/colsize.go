package plan

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/internal/db/table"
)

var typeArgsRe = regexp.MustCompile(`\((\d+)(?:,(\d+))?\)`)

func typeArgs(columnType string) (m, d int) {
	if a := typeArgsRe.FindStringSubmatch(columnType); a != nil {
		m, _ = strconv.Atoi(a[1])
		d, _ = strconv.Atoi(a[2])
	}
	return m, d
}

// fixedBytes is the storage size of a fixed-width type, and false for variable-length types.
// Sizes follow the MySQL manual's "Data Type Storage Requirements" (InnoDB, COMPACT and newer).
func fixedBytes(c table.Column) (int64, bool) {
	m, d := typeArgs(c.ColumnType)
	switch strings.ToLower(c.DataType) {
	case "tinyint", "year":
		return 1, true
	case "smallint":
		return 2, true
	case "mediumint", "date":
		return 3, true
	case "int", "integer", "float":
		return 4, true
	case "bigint", "double", "real":
		return 8, true
	case "decimal", "numeric":
		return decimalBytes(m, d), true
	case "time":
		return 3 + fspBytes(c.ColumnType), true
	case "datetime":
		return 5 + fspBytes(c.ColumnType), true
	case "timestamp":
		return 4 + fspBytes(c.ColumnType), true
	case "bit":
		return int64((m + 7) / 8), true
	case "enum":
		return 2, true
	case "set":
		return 8, true
	case "char", "binary":
		// InnoDB stores CHAR in a multi-byte character set as variable-length.
		if c.DataType == "binary" || c.OctetLength == int64(m) {
			return c.OctetLength, true
		}
	}
	return 0, false
}

func fspBytes(columnType string) int64 {
	fsp, _ := typeArgs(columnType)
	return int64((fsp + 1) / 2)
}

// decimalBytes packs 9 digits into 4 bytes, with the leftover digits in 1-4 bytes, per side.
func decimalBytes(m, d int) int64 {
	if m == 0 {
		m = 10
	}
	left := []int64{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}
	side := func(digits int) int64 { return int64(digits/9)*4 + left[digits%9] }
	return side(m-d) + side(d)
}

// maxBytes is the longest value a column can hold, in bytes (BLOB/TEXT report their type limit).
func maxBytes(c table.Column) int64 {
	if n, ok := fixedBytes(c); ok {
		return n
	}
	if c.OctetLength > 0 {
		return c.OctetLength
	}
	return 1 << 32 // BLOB-like without a reported length (geometry, json on MySQL)
}

// offPageThreshold: with the DYNAMIC format, InnoDB may store a variable-length column longer than
// 255 bytes off-page and keep only a 20-byte pointer in the row (docs/bench/constants.md, "Measurements
// behind the code's constants").
const (
	offPageThreshold = 255
	offPagePointer   = 20
	// recordOverhead: 5-byte record header, 6-byte DB_TRX_ID and 7-byte DB_ROLL_PTR.
	recordOverhead = 18
)

// inlineRowBytes estimates the worst-case size of a row in the clustered index, as InnoDB's
// strict-mode check computes it for DYNAMIC/COMPACT.
func inlineRowBytes(cols []table.Column, rowFormat string) int64 {
	total := int64(recordOverhead)
	nullable := 0
	for _, c := range cols {
		if c.Nullable {
			nullable++
		}
		if n, ok := fixedBytes(c); ok {
			total += n
			continue
		}
		n := maxBytes(c)
		lenBytes := int64(1)
		if n > 255 {
			lenBytes = 2
		}
		switch {
		case n <= offPageThreshold:
			total += n + lenBytes
		case strings.EqualFold(rowFormat, "COMPACT") || strings.EqualFold(rowFormat, "REDUNDANT"):
			// COMPACT keeps a 768-byte prefix inline.
			total += min(n, 768+offPagePointer) + lenBytes
		default:
			total += offPagePointer + lenBytes
		}
	}
	return total + int64((nullable+7)/8)
}

// maxRecordBytes is InnoDB's limit: half of an empty page's free space (8126 bytes at 16 KiB).
func maxRecordBytes(pageSize int64) int64 {
	return min((pageSize-132)/2, 16383)
}
