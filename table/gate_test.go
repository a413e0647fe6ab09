package table

import "testing"

func TestGateSortsFirst(t *testing.T) {
	for name, want := range map[string]bool{"t": true, "Orders": true, "0day": true, "_x": true, "#t": true, "#!x": false, "!x": false, " x": false} {
		if got := GateSortsFirst(name); got != want {
			t.Errorf("GateSortsFirst(%q) = %v, want %v", name, got, want)
		}
	}
	if GateSortsFirst(string(make([]byte, 60))) {
		t.Error("a gate name over 64 characters accepted")
	}
}
