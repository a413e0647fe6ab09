// Package bench is enginemig's production query-mix benchmark: a parallel load generator with
// latency histograms, MyISAM-vs-InnoDB comparison on scratch copies, reports and charts, and the
// gates that apply uses to decide whether a conversion may proceed.
//
// Why parallel and mixed: MyISAM locks the whole table on every write, so single-threaded tests
// flatter it; only concurrent readers and writers (and a report scan) show the lock contention that
// the migration is meant to remove. See docs/how-it-works.md, "Gates".
package bench
