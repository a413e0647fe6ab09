package dbconn

import (
	"io"
	"log"

	"github.com/go-sql-driver/mysql"
)

func init() {
	// The driver logs connection drops (e.g. a killed lock connection during cut-over) to stderr
	// on its own; enginemig reports every error it acts on, so the driver's copies are noise.
	mysql.SetLogger(log.New(io.Discard, "", 0))
}
