package dbconn

import "strings"

// MariaDB reports whether a VERSION() string names a MariaDB server ("10.11.19-MariaDB-log");
// anything else is taken for MySQL.
func MariaDB(version string) bool { return strings.Contains(strings.ToLower(version), "mariadb") }
