package copier

// Where the copy stands, for the two readers that must never be wrong about it: Ahead, which lets
// replay drop a change the copy will still read (rule 2 of the order, package shadow), and the
// watermark a resumed copy restarts after (rule 4). With parallel chunks (parallel.go) the two
// differ: chunks are handed out in key order but may finish out of it.
//
//   - Ahead compares with the frontier: the end of the furthest chunk that began. It is asked
//     while the Order is held exclusively, so every chunk that began has also been written; a key
//     above the frontier is in a range no chunk has read, and one will. A key below it is never
//     dropped, even where a range handed out has not begun: applying a change the copy then reads
//     again is harmless, dropping one it has passed would lose it.
//   - The watermark is the end of the longest run of written chunks from the start: a chunk
//     written past a gap is not counted until the gap is, so a resume never skips a range.

// handOut numbers the next chunk, in key order.
func (c *Copier) handOut() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handedOut++
	return c.handedOut
}

// began records that chunk seq, ending at hi (nil: the end of the table), holds the Order and
// reads now.
func (c *Copier) began(seq int, hi []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq <= c.furthest {
		return
	}
	c.furthest = seq
	if hi == nil {
		c.lastBegan = true
	} else {
		c.frontier = hi
	}
}

// finished records chunk seq, ending at hi, as written with rows rows; it runs before the
// chunk's Order ends.
func (c *Copier) finished(seq int, hi []any, rows int64) {
	c.mu.Lock()
	if c.finishedAt == nil {
		c.finishedAt = map[int][]any{}
	}
	c.finishedAt[seq] = hi
	for {
		end, ok := c.finishedAt[c.contiguous+1]
		if !ok {
			break
		}
		delete(c.finishedAt, c.contiguous+1)
		c.contiguous++
		if end != nil {
			c.watermark = end
		}
	}
	c.mu.Unlock()
	c.copied.Add(rows)
}

// written records a chunk copied on its own, read and written in one step, up to hi (nil: the
// copy is complete).
func (c *Copier) written(hi []any, rows int64) {
	seq := c.handOut()
	c.began(seq, hi)
	c.finished(seq, hi, rows)
}
