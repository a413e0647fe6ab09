package binlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// ErrTableChanged means DDL touched the migrated table while it was being migrated.
var ErrTableChanged = errors.New("the source table was changed by DDL during the migration")

// StreamConfig says which server to read and which table's changes to keep.
type StreamConfig struct {
	Conn     dbconn.Config
	Flavor   string // mysql.MariaDBFlavor or mysql.MySQLFlavor
	ServerID uint32 // must be unique among the server's replicas
	Table    *table.Info
	// IgnoreQuery, when set, exempts statements from DDL detection (rollback must step over the
	// cut-over's own RENAME, which follows the position it starts from).
	IgnoreQuery func(query string) bool
	// Triggers are the names of the table's triggers: dropping one is DDL on the table too
	// (DROP TRIGGER does not name the table). Creating a trigger on the table always is.
	Triggers []string
}

// Stream reads the binlog from a position and yields the migrated table's changes with the
// position reached after each event.
type Stream struct {
	cfg      StreamConfig
	syncer   *replication.BinlogSyncer
	streamer *replication.BinlogStreamer
	file     string
	pos      Position
	mapper   *rowMapper
	mapperID uint64
	ddlRe    *regexp.Regexp
}

// Item is one decoded event: changes of the migrated table (possibly none) and the position
// after the event, so replay can report how far it has got even when other tables are written.
type Item struct {
	Changes []Change
	Pos     Position
	// Boundary is true when Pos ends a transaction or statement group, so a stream can be
	// restarted there (mid-group, the table map a rows event refers to would be missing).
	Boundary bool
	// Time is when the event was written (the header's timestamp, whole seconds; zero for
	// artificial events).
	Time time.Time
}

// streamReadAhead is how many events the stream reads ahead of replay (see OpenStream).
const streamReadAhead = 16

// OpenStream connects as a replica and starts streaming at start.
func OpenStream(ctx context.Context, cfg StreamConfig, start Position) (*Stream, error) {
	tc, err := cfg.Conn.TLS()
	if err != nil {
		return nil, err
	}
	sc := replication.BinlogSyncerConfig{
		ServerID:                cfg.ServerID,
		Flavor:                  cfg.Flavor,
		User:                    cfg.Conn.User,
		Password:                cfg.Conn.Password.Reveal(),
		TLSConfig:               tc,
		UseDecimal:              false,
		ParseTime:               false,
		TimestampStringLocation: time.UTC,
		HeartbeatPeriod:         time.Second,
		ReadTimeout:             30 * time.Second,
		MaxReconnectAttempts:    10,
		// The events read ahead of replay: go-mysql's default is 10,240, each holding its whole
		// event, and the binlog also carries the copy's own writes to the shadow (the whole table
		// again) and other tables' rows. On a table of 2 MB rows enginemig's heap grew by 380-416
		// MB with it, 39-41 MB with 16 (TestWideRowsStayWithinMemory); 16 events of the usual 8 KB
		// keep the reader ahead of replay all the same.
		EventCacheCount: streamReadAhead,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if cfg.Conn.SSLMode == dbconn.SSLPreferred || cfg.Conn.SSLMode == dbconn.SSLDisabled {
		// The binlog connection carries row data; PREFERRED cannot fall back in go-mysql, so only
		// REQUIRED and stricter modes force TLS for it.
		sc.TLSConfig = nil
	}
	if addr := cfg.Conn.Address(); strings.HasPrefix(addr, "/") {
		sc.Host, sc.Port = "localhost", 0
		sc.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}
	} else {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		sc.Host, sc.Port = host, uint16(p)
	}
	s := &Stream{cfg: cfg, file: start.Name, pos: start}
	sc.RowsEventDecodeFunc = s.decodeRows
	s.ddlRe = ddlPattern(cfg.Table.Name, cfg.Triggers)
	s.syncer = replication.NewBinlogSyncer(sc)
	s.streamer, err = s.syncer.StartSync(start)
	if err != nil {
		s.syncer.Close()
		return nil, fmt.Errorf("start binlog stream at %s: %w", start, err)
	}
	return s, nil
}

// Close stops streaming.
func (s *Stream) Close() { s.syncer.Close() }

// Position is the position after the last event returned by Next.
func (s *Stream) Position() Position { return s.pos }

// Next waits for the next event and decodes it. It returns ctx's error when ctx ends first.
func (s *Stream) Next(ctx context.Context) (Item, error) {
	ev, err := s.streamer.GetEvent(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Item{}, ctx.Err()
		}
		return Item{}, fmt.Errorf("binlog stream: %w", err)
	}
	item, err := s.item(ev)
	if ev.Header.Timestamp > 0 {
		item.Time = time.Unix(int64(ev.Header.Timestamp), 0)
	}
	return item, err
}

func (s *Stream) item(ev *replication.BinlogEvent) (Item, error) {
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		s.file = string(e.NextLogName)
		s.pos = Position{Name: s.file, Pos: uint32(e.Position)}
		return Item{Pos: s.pos, Boundary: true}, nil
	case *replication.XIDEvent:
		s.advance(ev.Header)
		return Item{Pos: s.pos, Boundary: true}, nil
	case *replication.RowsEvent:
		s.advance(ev.Header)
		if !s.ours(e.Table) {
			return Item{Pos: s.pos}, nil
		}
		changes, err := s.decode(e, ev.Header.EventType)
		return Item{Changes: changes, Pos: s.pos}, err
	case *replication.QueryEvent:
		s.advance(ev.Header)
		if s.touchesTable(e) {
			return Item{Pos: s.pos}, fmt.Errorf("%w: %q at %s", ErrTableChanged, truncate(string(e.Query), 200), s.pos)
		}
		// COMMIT ends a group; BEGIN starts one; any other statement (DDL) is a group of its own.
		return Item{Pos: s.pos, Boundary: !strings.EqualFold(strings.TrimSpace(string(e.Query)), "BEGIN")}, nil
	default:
		s.advance(ev.Header)
		return Item{Pos: s.pos}, nil
	}
}

// decodeRows decodes the row images of the table's own events only; other tables' events keep
// their header (their table is all item needs). The copy's own writes to the target are the
// largest such stream (the whole table again), and a busy server logs other tables' writes too:
// decoding every value of them was most of enginemig's CPU, a core the copy's server needs.
func (s *Stream) decodeRows(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil || !s.ours(e.Table) {
		return err
	}
	return e.DecodeData(pos, data)
}

func (s *Stream) advance(h *replication.EventHeader) {
	// Artificial events (LogPos 0) do not move the position.
	if h.LogPos > 0 {
		s.pos = Position{Name: s.file, Pos: h.LogPos}
	}
}

func (s *Stream) ours(tm *replication.TableMapEvent) bool {
	return tm != nil && string(tm.Schema) == s.cfg.Table.Schema && string(tm.Table) == s.cfg.Table.Name
}

// touchesTable detects DDL on the migrated table from the statement text. It errs on the side of
// stopping: a false alarm costs a restart, a missed ALTER would corrupt the copy.
func (s *Stream) touchesTable(e *replication.QueryEvent) bool {
	q := string(e.Query)
	if s.cfg.IgnoreQuery != nil && s.cfg.IgnoreQuery(q) {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(q), "BEGIN") || strings.EqualFold(strings.TrimSpace(q), "COMMIT") {
		return false
	}
	return s.ddlRe.MatchString(q)
}

func (s *Stream) decode(e *replication.RowsEvent, evType replication.EventType) ([]Change, error) {
	if s.mapper == nil || s.mapperID != e.TableID {
		m, err := newRowMapper(s.cfg.Table, e.Table)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTableChanged, err)
		}
		s.mapper, s.mapperID = m, e.TableID
	}
	kind := e.Type()
	if evType == replication.PARTIAL_UPDATE_ROWS_EVENT {
		// An update whose JSON values may be diffs (mapRow refuses those).
		kind = replication.EnumRowsEventTypeUpdate
	}
	var out []Change
	switch kind {
	case replication.EnumRowsEventTypeInsert:
		for _, r := range e.Rows {
			after, err := s.mapper.mapRow(r)
			if err != nil {
				return nil, err
			}
			out = append(out, Change{Kind: Insert, After: after, At: s.pos})
		}
	case replication.EnumRowsEventTypeDelete:
		for _, r := range e.Rows {
			before, err := s.mapper.mapRow(r)
			if err != nil {
				return nil, err
			}
			out = append(out, Change{Kind: Delete, Before: before, At: s.pos})
		}
	case replication.EnumRowsEventTypeUpdate:
		if len(e.Rows)%2 != 0 {
			return nil, fmt.Errorf("update event with %d row images", len(e.Rows))
		}
		for i := 0; i < len(e.Rows); i += 2 {
			before, err := s.mapper.mapRow(e.Rows[i])
			if err != nil {
				return nil, err
			}
			after, err := s.mapper.mapRow(e.Rows[i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, Change{Kind: Update, Before: before, After: after, At: s.pos})
		}
	default:
		return nil, fmt.Errorf("unexpected rows event type %v", e.Type())
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ddlPattern matches DDL statements that name the table, CREATE TRIGGER on it, and DROP TRIGGER of
// one of its triggers. A name must stand alone (quoted, qualified or between spaces), so `_t_old`
// does not match t.
func ddlPattern(name string, triggers []string) *regexp.Regexp {
	alone := func(n string) string {
		// Inside a quoted name, SQL text doubles each backtick: match the name written either way.
		return "`?(?:" + regexp.QuoteMeta(n) + "|" + regexp.QuoteMeta(strings.ReplaceAll(n, "`", "``")) + ")`?"
	}
	end := `([\s.,;()` + "`" + `]|$)`
	alt := []string{`^\s*(/\*.*?\*/\s*)*(ALTER|DROP|RENAME|TRUNCATE|OPTIMIZE|REPAIR)\b[^;]*(^|[\s.,(` + "`" + `])` + alone(name) + end,
		`^\s*(/\*.*?\*/\s*)*CREATE\b.*?\bTRIGGER\b.*?\bON\s+(\S+\.)?` + alone(name) + end}
	for _, t := range triggers {
		alt = append(alt, `^\s*(/\*.*?\*/\s*)*DROP\s+TRIGGER\s+(IF\s+EXISTS\s+)?(\S+\.)?`+alone(t)+end)
	}
	return regexp.MustCompile(`(?is)(?:` + strings.Join(alt, ")|(?:") + `)`)
}
