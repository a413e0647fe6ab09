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

func TestGateStatements(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{CreateGate("d", "#t_gate", "enginemig swap-back gate"), "CREATE TABLE IF NOT EXISTS `d`.`#t_gate` (id INT PRIMARY KEY) ENGINE=InnoDB COMMENT='enginemig swap-back gate'"},
		{HoldGate("d", "#t_gate"), "HANDLER `d`.`#t_gate` OPEN AS enginemig_gate"},
	} {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
}
