package copier

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/throttle"
)

// The one walk over a copy key, shared by the server-side copy, the client-side copy and
// verification, so that the three cannot differ in how they size, rest and go on. Each step:
//
//  1. is planned: its lock-time target and whether other clients wait for the table (target),
//     then its range (next), read by index only;
//  2. is visited: the visit works on the range and, once its work has let go of the source, calls
//     release with what that work took (took sizes the chunks that follow) and how long it held
//     the source (restFor: the rest owed, nothing unless other clients were waiting);
//  3. from release on, the next step is planned beside what is left of the visit and the rest,
//     so the source is never held for the planning and the next chunk can begin as soon as the
//     rest ends. A range found before its chunk begins is still a contiguous range, whatever rows
//     change meanwhile.

// Step is one range of the walk with what its planning saw.
type Step struct {
	table.Range // Hi is nil for the last step, which reads to the end of the table
	// Size is the range's size in rows when its end was found.
	Size int
	// Target is the lock-time target of the step's chunk.
	Target time.Duration
	// Contended: other clients waited for the table just before the step was planned.
	Contended bool
}

// Last reports the step that reads to the end of the table.
func (s Step) Last() bool { return s.Hi == nil }

// Visit works on one step. Once the step's work no longer holds the source it calls release
// with the time that sizes the following chunks and the time the source was held; a step that
// runs beside others calls it at once, with zeros (it sizes the walk later, with took). Visit
// returns the moment the rest is counted from (zero: its return).
type Visit func(ctx context.Context, s Step, release func(took, held time.Duration)) (restFrom time.Time, err error)

// Walk walks the key from the row after lo (nil: from the start) to the end of the table, one
// step at a time, resting after each step what it owes. visit must call release, if at all,
// before it returns.
func (c *Chunker) Walk(ctx context.Context, lo []any, visit Visit) error {
	began := time.Now()
	defer func() { c.walked(time.Since(began)) }()
	s, err := c.plan(ctx, lo)
	for err == nil {
		var rest time.Duration
		var next chan planned
		release := func(took, held time.Duration) {
			if next != nil || s.Last() {
				return
			}
			c.held(held)
			c.took(s, took)
			rest, next = c.restFor(held), make(chan planned, 1)
			c.count(s, held, rest)
			go func(lo []any) {
				p, err := c.plan(ctx, lo)
				next <- planned{p, err}
			}(s.Hi)
		}
		from, verr := visit(ctx, s, release)
		if verr != nil {
			if next != nil {
				<-next
			}
			return verr
		}
		if s.Last() {
			return nil
		}
		if next == nil {
			return fmt.Errorf("the step after %v was never planned: its visit did not release the source", s.Lo)
		}
		if from.IsZero() {
			from = time.Now()
		}
		restErr := throttle.Sleep(ctx, rest-time.Since(from))
		p := <-next
		s, err = p.Step, errors.Join(restErr, p.err)
		if err == nil && c.stale(s) {
			s, err = c.plan(ctx, s.Lo)
		}
	}
	return err
}

type planned struct {
	Step
	err error
}

// plan plans the step after lo.
func (c *Chunker) plan(ctx context.Context, lo []any) (Step, error) {
	s := Step{Range: table.Range{Lo: lo}}
	s.Target, s.Contended = c.target(ctx)
	var err error
	s.Hi, s.Size, err = c.next(ctx, lo)
	if err == nil && lo != nil && s.Hi != nil && reflect.DeepEqual(lo, s.Hi) {
		// A range that ends where it begins holds no row, and the next would be the same: the
		// walk would never end. Only a key order that disagrees with the server's does that.
		return s, fmt.Errorf("the copy's walk did not advance past %v: the key order disagrees with the server's (a bug: please report it with the table's CREATE TABLE)", lo)
	}
	return s, err
}
