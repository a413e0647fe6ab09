// Package demo is enginemig's guided tour: it seeds game-like MyISAM tables, runs a live
// application load that remembers every write the server acknowledged, and walks through plan,
// the before-copy benchmark gate and apply, then proves that nothing the application wrote was lost.
package demo
