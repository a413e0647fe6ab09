package bench

import "math/rand/v2"

// WebMix is the production query mix, defined once for everything in enginemig that imitates an
// application: per 24 operations on a hot table, 16 primary-key SELECTs, 7 UPDATEs and 1 INSERT
// (the shape of a typical web application's game or session table). The benchmark
// runs it by default, and the demo's application, cmd/applybench and the ackload test
// helper draw their operations from it, so what is measured, shown and tested is one workload.
func WebMix() Mix { return Mix{Select: 16, Update: 7, Insert: 1} }

// Op is one of a Mix's built-in primary-key statements.
type Op int

const (
	OpSelect Op = iota
	OpUpdate
	OpInsert
	OpDelete
)

func (o Op) String() string {
	switch o {
	case OpSelect:
		return "select"
	case OpUpdate:
		return "update"
	case OpInsert:
		return "insert"
	case OpDelete:
		return "delete"
	}
	return "unknown"
}

// Op maps n in [0, m.Total()) to an operation: the first m.Select values are SELECTs, the next
// m.Update UPDATEs, then INSERTs, then DELETEs. Callers draw n themselves so a load with
// operations of its own (ackload's key changes) can draw from a wider range and keep the values
// from m.Total() up for those.
func (m Mix) Op(n int) Op {
	return Op(weightedIndex(n, m.Select, m.Update, m.Insert, m.Delete))
}

// Draw chooses an operation in the mix's proportions with one r.IntN(m.Total()), so a seeded r
// gives the same sequence every run. The mix must have a statement (Total() > 0).
func (m Mix) Draw(r *rand.Rand) Op { return m.Op(r.IntN(m.Total())) }

// weightedIndex returns the i whose share of [0, sum of weights) holds n, each weight taking the
// next weights[i] values: the one weighted choice behind both Mix.Op and the benchmark's
// statements (which add --query templates to the built-in ones). An n past the end gives the
// last index.
func weightedIndex(n int, weights ...int) int {
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}
