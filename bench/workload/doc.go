// Package workload reads what statements the application runs on a table: from
// performance_schema's statement digests (counted over an observation window, or since the
// counters were last reset) or from a slow or general log file, and attributes each statement to
// the tables it reads or writes.
//
// Why its own package: bench replays the captured statements on scratch copies, and plan tells
// which statements cause a table's lock waits; both need the same reading and parsing, and plan
// must not depend on bench (nor bench on plan).
package workload
