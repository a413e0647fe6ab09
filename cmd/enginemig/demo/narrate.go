package demo

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// narrate is a logger that tells the records of a step (apply, rollback) in the walkthrough, one
// line each: "  apply: cut-over done ... table=game.horses". Debug records are left out.
func narrate(w io.Writer, step string) *slog.Logger {
	return slog.New(&narrator{mu: &sync.Mutex{}, w: w, prefix: "  " + step + ": "})
}

type narrator struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	attrs  string // preformatted " key=value" pairs from With
	group  string // "g." for WithGroup("g")
}

func (n *narrator) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (n *narrator) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(n.prefix)
	if r.Level >= slog.LevelWarn {
		b.WriteString(r.Level.String() + ": ")
	}
	b.WriteString(r.Message)
	b.WriteString(n.attrs)
	r.Attrs(func(a slog.Attr) bool {
		n.appendAttr(&b, n.group, a)
		return true
	})
	b.WriteByte('\n')
	n.mu.Lock()
	defer n.mu.Unlock()
	_, err := io.WriteString(n.w, b.String())
	return err
}

func (n *narrator) appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			n.appendAttr(b, group+a.Key+".", g)
		}
		return
	}
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " =\"\n") {
		v = strconv.Quote(v)
	}
	b.WriteString(" " + group + a.Key + "=" + v)
}

func (n *narrator) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range attrs {
		n.appendAttr(&b, n.group, a)
	}
	c := *n
	c.attrs += b.String()
	return &c
}

func (n *narrator) WithGroup(name string) slog.Handler {
	if name == "" {
		return n
	}
	c := *n
	c.group += name + "."
	return &c
}
