// Package plan inspects a server read-only and says, for each MyISAM table, whether and how it can
// be converted to InnoDB: compatibility findings, size/time/disk estimates, lock-contention ranking,
// and the versioned plan file that apply consumes.
//
// The checks are pure functions of facts gathered up front (TableInput, ServerInfo), so each can be
// unit-tested with table-driven inputs as well as against a real server. The only write plan ever
// makes is the optional test-compile of the shadow table (see compile.go).
package plan
