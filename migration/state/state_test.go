package state

import (
	"math"
	"reflect"
	"testing"
)

func TestKeyEncodingRoundTrips(t *testing.T) {
	for _, key := range [][]any{
		{int64(42)},
		{uint64(math.MaxUint64)},
		{int64(math.MinInt64), []byte{0, 0xff, '"', '\\'}},
		{[]byte("héllo"), int64(-7)},
		{[]byte{}},
		{nil, []byte("2024-01-01 00:00:00.000000")},
	} {
		got, err := DecodeKey(EncodeKey(key))
		if err != nil || !reflect.DeepEqual(got, key) {
			t.Errorf("%v -> %q -> %v %v", key, EncodeKey(key), got, err)
		}
	}
	if k, err := DecodeKey(""); k != nil || err != nil {
		t.Fatal("empty watermark")
	}
	if _, err := DecodeKey("{"); err == nil {
		t.Fatal("corrupt watermark accepted")
	}
}
