package table

import "strconv"

// CompareInts compares two integer key values that may arrive as any Go integer type (binlog
// events) or as decimal text; ok is false when either is not an integer.
func CompareInts(a, b any) (int, bool) {
	an, aok := toSignMag(a)
	bn, bok := toSignMag(b)
	if !aok || !bok {
		return 0, false
	}
	switch {
	case an.neg && !bn.neg:
		return -1, true
	case !an.neg && bn.neg:
		return 1, true
	}
	c := 0
	if an.mag < bn.mag {
		c = -1
	} else if an.mag > bn.mag {
		c = 1
	}
	if an.neg {
		c = -c
	}
	return c, true
}

type signMag struct {
	neg bool
	mag uint64
}

func fromInt(v int64) signMag {
	if v < 0 {
		return signMag{true, uint64(-(v + 1)) + 1}
	}
	return signMag{false, uint64(v)}
}

func toSignMag(v any) (signMag, bool) {
	switch x := v.(type) {
	case int:
		return fromInt(int64(x)), true
	case int8:
		return fromInt(int64(x)), true
	case int16:
		return fromInt(int64(x)), true
	case int32:
		return fromInt(int64(x)), true
	case int64:
		return fromInt(x), true
	case uint8:
		return signMag{false, uint64(x)}, true
	case uint16:
		return signMag{false, uint64(x)}, true
	case uint32:
		return signMag{false, uint64(x)}, true
	case uint64:
		return signMag{false, x}, true
	case []byte:
		return parseSignMag(string(x))
	case string:
		return parseSignMag(x)
	}
	return signMag{}, false
}

func parseSignMag(s string) (signMag, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return fromInt(n), true
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return signMag{false, n}, true
	}
	return signMag{}, false
}
