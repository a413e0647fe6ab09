package cutover

// Telling enginemig's sentry tables (the cut-over's placeholder) from others.

import (
	"context"
	"database/sql"
	"errors"
)

// IsSentry reports whether schema.name is a cut-over sentry left by enginemig.
func IsSentry(ctx context.Context, db *sql.DB, schema, name string) bool {
	ours, _ := isSentry(ctx, db, schema, name)
	return ours
}

// isSentry is IsSentry telling a table that is not there (false, nil) from a table list it
// could not read (the error).
func isSentry(ctx context.Context, db *sql.DB, schema, name string) (bool, error) {
	var comment string
	err := db.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&comment)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && comment == SentryComment, err
}
