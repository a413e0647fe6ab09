package diskspace

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestParseReserve(t *testing.T) {
	for in, want := range map[string]Reserve{
		"0": {}, "2G": {Bytes: 2 << 30}, "512M": {Bytes: 512 << 20}, "1.5GiB": {Bytes: 3 << 29}, "10%": {Share: 0.10}, "64MB": {Bytes: 64 << 20},
	} {
		got, err := ParseReserve(in)
		if err != nil || got != want {
			t.Errorf("ParseReserve(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ten", "-1G", "150%", "1X"} {
		if _, err := ParseReserve(bad); err == nil {
			t.Errorf("ParseReserve(%q) accepted", bad)
		}
	}
}

func TestReserveOf(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		r           Reserve
		total, want uint64
	}{
		{DefaultReserve, 100 * gib, 10 * gib}, // a tenth
		{DefaultReserve, 4 * gib, gib},        // the floor
		{DefaultReserve, gib / 2, gib / 2},    // never more than the file system
		{Reserve{}, 100 * gib, 0},
	} {
		if got := c.r.Of(c.total); got != c.want {
			t.Errorf("%s of %s = %s, want %s", c.r, Human(c.total), Human(got), Human(c.want))
		}
	}
}

func TestIsFull(t *testing.T) {
	for _, err := range []error{
		&mysql.MySQLError{Number: 1114, Message: "The table '_t_new' is full"},
		fmt.Errorf("copy: %w", &mysql.MySQLError{Number: 1021, Message: "Disk full (/tmp/x); waiting for someone to free some space..."}),
		errors.New("Error writing file './mysql-bin.000002' (Errcode: 28 \"No space left on device\")"),
		&Error{Full: true, Why: "no space left"},
	} {
		if _, ok := IsFull(err); !ok {
			t.Errorf("IsFull(%v) = false", err)
		}
	}
	for _, err := range []error{nil, errors.New("Lock wait timeout exceeded"), &mysql.MySQLError{Number: 1205}, &Error{Why: "pause limit"}} {
		if why, ok := IsFull(err); ok {
			t.Errorf("IsFull(%v) = true (%s)", err, why)
		}
	}
}

func TestMountOf(t *testing.T) {
	mounts := []mount{{path: "/"}, {path: "/var"}, {path: "/var/lib/mysql"}, {path: "/var/lib/mysql-binlog"}}
	for dir, want := range map[string]string{
		"/var/lib/mysql": "/var/lib/mysql", "/var/lib/mysql/db": "/var/lib/mysql", "/var/lib/mysql-binlog": "/var/lib/mysql-binlog",
		"/var/lib/mysqlx": "/var", "/tmp": "/",
	} {
		if m, ok := mountOf(mounts, dir); !ok || m.path != want {
			t.Errorf("mountOf(%s) = %s, want %s", dir, m.path, want)
		}
	}
}
