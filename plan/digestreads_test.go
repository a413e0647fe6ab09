package plan

import "testing"

// readsOf indexes each SELECT under every table it reads, joins too, one entry per digest even
// when a table is read twice; writes and enginemig's own reads are left out.
func TestReadsOfIndexesEachSelectByItsTables(t *testing.T) {
	join := Digest{Schema: "s", Text: "SELECT `a` . `id` FROM `u` `a` JOIN `T` `b` USING ( `id` ) JOIN `t` `c` USING ( `id` )"}
	other := Digest{Schema: "x", Text: "SELECT * FROM `s` . `t` WHERE `id` = ?"}
	write := Digest{Schema: "s", Text: "UPDATE `t` SET `v` = ?"}
	srv := &ServerInfo{Digests: []Digest{join, other, write}, reads: &digestReads{}}
	for _, c := range []struct {
		schema, name string
		want         []Digest
	}{
		{"s", "t", []Digest{join, other}},
		{"s", "u", []Digest{join}},
		{"x", "t", nil},
	} {
		got := srv.readsOf(c.schema, c.name)
		if len(got) != len(c.want) {
			t.Fatalf("%s.%s: got %d reads %+v, want %+v", c.schema, c.name, len(got), got, c.want)
		}
		for i := range got {
			if got[i].Text != c.want[i].Text {
				t.Fatalf("%s.%s: read %d is %q, want %q", c.schema, c.name, i, got[i].Text, c.want[i].Text)
			}
		}
	}
}
