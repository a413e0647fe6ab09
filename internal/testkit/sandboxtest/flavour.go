package sandboxtest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
)

// FlavourEnv selects the server flavour of every sandbox a test binary starts (ForTest and Main
// with an empty Options.Flavour): mariadb-10.11 (default, the host's), mariadb-11.8 or mysql-9.7.
const FlavourEnv = "ENGINEMIG_TEST_FLAVOUR"

// Flavour is the flavour FlavourEnv asks for, MariaDB1011 when it is unset.
func Flavour() (sandbox.Flavour, error) {
	return sandbox.ParseFlavour(os.Getenv(FlavourEnv))
}

// Requested reports whether FlavourEnv names f explicitly.
func Requested(f sandbox.Flavour) bool { return os.Getenv(FlavourEnv) == string(f) }

// ForFlavour starts a server of flavour f for one test. When f's chroot is absent the test is
// skipped, unless FlavourEnv asks for f: then it fails, because the flavour was requested and a
// skip would hide that nothing was tested.
func ForFlavour(tb testing.TB, f sandbox.Flavour, opts sandbox.Options) *sandbox.Server {
	tb.Helper()
	if err := f.Available(); err != nil {
		if Requested(f) || f == sandbox.MariaDB1011 {
			tb.Fatal(err)
		}
		tb.Skipf("%v (set %s=%s to make this a failure)", err, FlavourEnv, f)
	}
	opts.Flavour = f
	return ForTest(tb, opts)
}

// Seq is a row source for INSERT ... SELECT that works on MariaDB and MySQL alike: a derived
// table named seq_1_to_N with one column seq holding 1..n, in place of MariaDB's SEQUENCE-engine
// table of the same name (MySQL has none). It is a cross join of digit tables, so it needs no
// recursion limit; rows come in no particular order.
func Seq(n int) string {
	if n < 1 {
		return fmt.Sprintf("(SELECT 1 AS seq FROM DUAL WHERE FALSE) AS seq_1_to_%d", n)
	}
	const digits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
		"UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var expr, from []string
	scale := 1
	for i := 0; scale < n; i++ {
		expr = append(expr, fmt.Sprintf("%d*d%d.d", scale, i))
		from = append(from, fmt.Sprintf("%s AS d%d", digits, i))
		scale *= 10
	}
	if len(expr) == 0 { // n == 1
		return "(SELECT 1 AS seq) AS seq_1_to_1"
	}
	sum := strings.Join(expr, " + ") + " + 1"
	return fmt.Sprintf("(SELECT %s AS seq FROM %s WHERE %s <= %d) AS seq_1_to_%d",
		sum, strings.Join(from, " CROSS JOIN "), sum, n, n)
}
