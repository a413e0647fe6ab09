package diskspace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/go-sql-driver/mysql"
)

// Source reads the file systems' free space.
type Source interface {
	Name() string
	Read(ctx context.Context) ([]FS, error)
}

// Detect picks the source for db's server: statfs on the database host (SameHost), else
// information_schema.DISKS where it answers. Without either it returns nil and says why and what
// to do, for a log line or a plan finding.
func Detect(ctx context.Context, db dbconn.Querier) (Source, string) {
	dirs, err := ServerDirs(ctx, db)
	if err != nil {
		return nil, err.Error()
	}
	root, notLocal := SameHost(ctx, db)
	if notLocal == "" {
		l := NewLocal(root, dirs)
		if _, err := l.Read(ctx); err == nil {
			return l, ""
		} else {
			notLocal = err.Error()
		}
	}
	d := NewDisks(db, dirs)
	_, derr := d.Read(ctx)
	if derr == nil {
		return d, ""
	}
	return nil, fmt.Sprintf("%v: not on the database host (%s), and %v; on MariaDB, INSTALL SONAME 'disks' and GRANT FILE to enginemig's account; on MySQL no SQL view shows free space, so run enginemig on the database host",
		ErrNoSource, notLocal, derr)
}

// How the watch runs. Four reads a second: a copy writing 50 MB/s fills 12 MB between two, well
// inside any reserve worth the name. Full-disk states are looked for once a second.
const (
	DefaultInterval   = 250 * time.Millisecond
	reportEvery       = 10 * time.Second
	sessionsEvery     = time.Second
	DefaultPauseLimit = 30 * time.Minute
)

// Config says what a Watch watches and what it does when it gives up.
type Config struct {
	Source     Source
	Reserve    Reserve
	Interval   time.Duration // DefaultInterval when 0
	PauseLimit time.Duration // DefaultPauseLimit when 0
	// DB, when set, is used to look for sessions the server holds for want of space.
	DB     *sql.DB
	Logger *slog.Logger // nil discards
	// GiveUp is called once, with an *Error, when the file systems stayed under the reserve
	// longer than PauseLimit or the disk was found full.
	GiveUp func(*Error)
}

// Watch reads the file systems in the background; Low and Status read its last reading.
type Watch struct {
	cfg Config

	mu        sync.Mutex
	fss       []FS
	err       error
	at        time.Time
	lowSince  time.Time // zero while above the reserve
	reported  time.Time
	full      string // why the disk is full, once seen
	gaveUp    bool
	sessionAt time.Time
}

// NewWatch prepares a watch; Start begins it.
func NewWatch(cfg Config) *Watch {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.PauseLimit <= 0 {
		cfg.PauseLimit = DefaultPauseLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watch{cfg: cfg}
}

// Start reads once, then every Interval until the returned stop is called.
func (w *Watch) Start(ctx context.Context) (stop func()) {
	w.check(ctx)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(w.cfg.Interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			w.check(ctx)
		}
	}()
	return func() { cancel(); <-done }
}

// check takes one reading and acts on it.
func (w *Watch) check(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	fss, err := w.cfg.Source.Read(rctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	for i := range fss {
		fss[i].Reserve = w.cfg.Reserve.Of(fss[i].Total)
	}
	full := w.fullNow(ctx, fss, now)
	w.mu.Lock()
	w.fss, w.err, w.at = fss, err, now
	var low []FS
	for _, f := range fss {
		if f.Low() {
			low = append(low, f)
		}
	}
	var give *Error
	switch {
	case len(low) > 0 && w.lowSince.IsZero():
		w.lowSince, w.reported = now, now
		w.cfg.Logger.Warn("disk: free space under the reserve; the copy waits until it is back", "disk", describe(low), "gives_up_after", w.cfg.PauseLimit)
	case len(low) > 0 && now.Sub(w.reported) >= reportEvery:
		w.reported = now
		w.cfg.Logger.Warn("disk: still under the reserve", "disk", describe(low), "waited", now.Sub(w.lowSince).Round(time.Second), "gives_up_after", w.cfg.PauseLimit)
	case len(low) == 0 && !w.lowSince.IsZero() && err == nil:
		w.cfg.Logger.Info("disk: free space back over the reserve", "disk", describe(fss), "waited", now.Sub(w.lowSince).Round(100*time.Millisecond))
		w.lowSince = time.Time{}
	}
	if full != "" && w.full == "" {
		w.full = full
		w.cfg.Logger.Error("disk full: " + full)
	}
	if !w.gaveUp {
		switch {
		case w.full != "":
			give = &Error{Full: true, Why: w.full, FS: fss}
		case len(low) > 0 && now.Sub(w.lowSince) > w.cfg.PauseLimit:
			give = &Error{Why: fmt.Sprintf("free space stayed under the reserve for %s (--disk-pause-limit)", w.cfg.PauseLimit), FS: low}
		}
		w.gaveUp = give != nil
	}
	w.mu.Unlock()
	if give != nil && w.cfg.GiveUp != nil {
		w.cfg.GiveUp(give)
	}
}

// fullNow says why the disk is full now, or "": a file system with nothing free, or sessions the
// server holds until someone frees space (looked for once a second).
func (w *Watch) fullNow(ctx context.Context, fss []FS, now time.Time) string {
	for _, f := range fss {
		if f.Free == 0 && f.Total > 0 {
			return "no space left: " + f.String()
		}
	}
	if w.cfg.DB == nil {
		return ""
	}
	w.mu.Lock()
	due := now.Sub(w.sessionAt) >= sessionsEvery
	if due {
		w.sessionAt = now
	}
	w.mu.Unlock()
	if !due {
		return ""
	}
	n, state := waitingForSpace(ctx, w.cfg.DB)
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d session(s) on the server wait for disk space (%q)", n, state)
}

// waitingForSpace counts the sessions the server holds until space is freed. MariaDB and MySQL
// show "Waiting for someone to free space" while a write waits for a full disk (they retry once a
// minute).
func waitingForSpace(ctx context.Context, db *sql.DB) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, q := range []string{
		"SELECT COUNT(*), COALESCE(MAX(STATE), '') FROM information_schema.PROCESSLIST WHERE " + FullStateCondition("STATE"),
		"SELECT COUNT(*), COALESCE(MAX(PROCESSLIST_STATE), '') FROM performance_schema.threads WHERE " + FullStateCondition("PROCESSLIST_STATE"),
	} {
		var n int
		var state string
		if err := db.QueryRowContext(ctx, q).Scan(&n, &state); err == nil {
			return n, state
		}
	}
	return 0, ""
}

// FullStateCondition selects the process-list states of a write waiting for disk space.
func FullStateCondition(col string) string {
	return col + " LIKE '%free space%' OR " + col + " LIKE '%disk full%'"
}

// IsFullState reports a process-list state of a write waiting for disk space.
func IsFullState(state string) bool {
	s := strings.ToLower(state)
	return strings.Contains(s, "free space") || strings.Contains(s, "disk full")
}

func describe(fss []FS) string {
	parts := make([]string, len(fss))
	for i, f := range fss {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

// Low reports whether the copy must wait for disk space, and why with the numbers.
func (w *Watch) Low() (string, bool) {
	if w == nil {
		return "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var low []FS
	for _, f := range w.fss {
		if f.Low() {
			low = append(low, f)
		}
	}
	if w.full != "" {
		return "disk full: " + w.full, true
	}
	if len(low) == 0 {
		return "", false
	}
	return "disk: " + describe(low), true
}

// Full is why the disk was found full, "" if it was not.
func (w *Watch) Full() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.full
}

// Status is the watch's view for status and metrics.
type Status struct {
	Source     string    `json:"source"`
	Reserve    string    `json:"reserve"`
	FS         []FS      `json:"file_systems"`
	Error      string    `json:"error,omitempty"`
	Low        bool      `json:"low"`
	LowSince   time.Time `json:"low_since,omitzero"`
	Full       string    `json:"full,omitempty"`
	PauseLimit float64   `json:"pause_limit_seconds"`
}

// Status returns the last reading.
func (w *Watch) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Status{Source: w.cfg.Source.Name(), Reserve: w.cfg.Reserve.String(), FS: append([]FS(nil), w.fss...),
		Low: !w.lowSince.IsZero(), LowSince: w.lowSince, Full: w.full, PauseLimit: w.cfg.PauseLimit.Seconds()}
	if w.err != nil {
		st.Error = w.err.Error()
	}
	return st
}

// WaitRoom blocks while the file systems are under the reserve (before a step that writes much
// at once, such as an index build), until ctx ends.
func (w *Watch) WaitRoom(ctx context.Context) error {
	for {
		if _, low := w.Low(); !low {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.cfg.Interval):
		}
	}
}

// Error ends a run for want of disk space.
type Error struct {
	Full bool // the disk filled; otherwise the pause limit passed
	Why  string
	FS   []FS
}

func (e *Error) Error() string {
	if e.Full {
		return "the disk is full: " + e.Why
	}
	return e.Why + ": " + describe(e.FS)
}

// Full errors of the server: InnoDB's "table is full" (1114) when it cannot extend a file, "disk
// full" (1021), and errno 28 (ENOSPC) inside any other error.
const (
	errRecordFileFull = 1114
	errDiskFull       = 1021
)

// IsFull reports an error that says the disk is full, with its words.
func IsFull(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var de *Error
	if errors.As(err, &de) && de.Full {
		return de.Error(), true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == errRecordFileFull || me.Number == errDiskFull) {
		return fmt.Sprintf("the server could not write for want of disk space (error %d: %s)", me.Number, me.Message), true
	}
	s := err.Error()
	for _, m := range []string{"errno: 28", "Errcode: 28", "errno 28", "No space left on device"} {
		if strings.Contains(s, m) {
			return "the server could not write for want of disk space (errno 28: " + s + ")", true
		}
	}
	return "", false
}
