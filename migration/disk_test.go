package migration

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/pace/diskspace"
)

// The disk tests give a server of their own a datadir (and with it the binlog) on a small tmpfs:
// the fresh datadir takes about 66 MiB, the table and its binlog about 10 MiB, its copy (the
// shadow and the copy's binlog) about 11 MiB, the application's writes about 0.1 MiB a second.
const (
	diskFS      = 224 << 20
	diskReserve = 64 << 20 // --disk-reserve for these tests: the default (1 GiB) is more than the tmpfs
	// The filler leaves this much free: under the reserve, more than the application writes while
	// the copy waits, and less than what the rest of the copy writes (a copy that does not wait
	// fills the disk: TestDiskFull).
	diskLeft = 6 << 20
	// The tests where the copy must wait before the disk fills leave more: what the copy writes
	// before its watch (every 250 ms) sees the space gone, and its chunks in flight, once took
	// all of diskLeft in a CI run (TestDiskReserve: 1114).
	diskHeadroom = 12 << 20
	// It starts once the run has written this much (the copy has begun).
	diskGrown = 1536 << 10
)

// diskServer starts a server whose datadir is a fresh tmpfs, and returns it with the mount.
func diskServer(t *testing.T) (*sandbox.Server, string) {
	if f, _ := sandboxtest.Flavour(); f != "" && f != sandbox.MariaDB1011 {
		t.Skipf("the disk tests mount the datadir of a host server; %s runs in a chroot", f)
	}
	dir := sandboxtest.Tmpfs(t, diskFS)
	return sandboxtest.ForTest(t, sandbox.Options{DataDir: dir}), dir
}

func freeBytes(t *testing.T, dir string) uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// filler is another writer on the file system (a backup, a growing log): once the copy has
// written grown bytes, it takes all but left of the free space, and gives it back when release is
// called. It also samples the free space every 10 ms and keeps the least seen.
type filler struct {
	t        *testing.T
	dir      string
	least    atomic.Uint64
	filled   chan struct{}
	released chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startFiller(t *testing.T, dir string, grown, left uint64) *filler {
	f := &filler{t: t, dir: dir, filled: make(chan struct{}), released: make(chan struct{}), stop: make(chan struct{})}
	start := freeBytes(t, dir)
	f.least.Store(start)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		done := false
		for {
			free := freeBytes(t, dir)
			if free < f.least.Load() {
				f.least.Store(free)
			}
			if !done && start-free >= grown {
				done = true
				if err := fill(dir+"/filler", func() uint64 { return freeBytes(t, dir) }, left); err != nil {
					t.Errorf("filler: %v", err)
				}
				t.Logf("filler: took %s, %s left", diskspace.Human(free-left), diskspace.Human(freeBytes(t, dir)))
				close(f.filled)
			}
			select {
			case <-f.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return f
}

// fill grows a file until free() is left, a MiB at a time so as never to take more than is
// free while others write (tmpfs allocates as the file grows).
func fill(path string, free func() uint64, left uint64) error {
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var size int64
	for f := free(); f > left; f = free() {
		step := int64(min(f-left, 1<<20))
		if err := syscall.Fallocate(fd, 0, size, step); err != nil {
			return err
		}
		size += step
	}
	return nil
}

// release gives the space back.
func (f *filler) release() {
	if err := syscall.Unlink(f.dir + "/filler"); err != nil {
		f.t.Errorf("filler: %v", err)
	}
	close(f.released)
}

func (f *filler) end() uint64 {
	close(f.stop)
	f.wg.Wait()
	return f.least.Load()
}

// diskLoad makes the application's table and starts its writers; stop ends them.
func diskLoad(t *testing.T, s *sandbox.Server) (*ackload.Load, func()) {
	db := openControl(t, s)
	sandboxtest.MustExec(t, db, "CREATE DATABASE d")
	l, err := ackload.Create(context.Background(), db, "d", "t", ackload.Config{Writers: 4, RowsPerWriter: 15000, Pause: 3 * time.Millisecond}) // the fill's timing (docs/testing/faults-and-disk.md) was set at this rate
	if err != nil {
		t.Fatal(err)
	}
	return l, l.Start()
}

// TestDiskReserve: another writer takes the datadir's free space during the copy. The copy
// waits (throttle reason disk, logged with the numbers) instead of filling the disk, the
// application's writes never wait for disk, and once the space is back the conversion finishes
// with every acknowledged write.
func TestDiskReserve(t *testing.T) {
	s, dir := diskServer(t)
	l, stopLoad := diskLoad(t, s)
	var log logLines
	f := startFiller(t, dir, diskGrown, diskHeadroom)
	waited := make(chan struct{})
	var once sync.Once
	log.each = func(line string) {
		os.Stderr.WriteString("    migration: " + line)
		if strings.Contains(line, "free space under the reserve") {
			once.Do(func() { close(waited) })
		}
	}
	// The space comes back 3 s after the copy began to wait (the application must not notice the
	// wait), or at once when the run ended first; the test waits for it before it ends.
	ended, released := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(released)
		select {
		case <-waited:
			select {
			case <-time.After(3 * time.Second):
			case <-ended:
			}
		case <-ended:
		case <-time.After(40 * time.Second):
		}
		f.release()
	}()
	defer func() { close(ended); <-released }()
	opts := testOptions(s, "d", "t")
	r := diskspace.Reserve{Bytes: diskReserve}
	opts.DiskReserve = &r
	opts.Logger = log.logger()
	_, err := Run(context.Background(), openControl(t, s), opts)
	stopLoad()
	least := f.end()
	st := l.Stats()
	t.Logf("least free %s; application: %d writes, %d errors, longest write %s", diskspace.Human(least), st.Acked, st.Errors, st.LongestWrite)
	if err != nil {
		t.Fatalf("migration failed: %v\nlog:\n%s", err, tail(log.String(), 30))
	}
	select {
	case <-waited:
	default:
		t.Fatalf("the copy never waited for disk space\nlog:\n%s", tail(log.String(), 30))
	}
	if least == 0 {
		t.Errorf("the file system filled up (0 bytes free)")
	}
	if st.Errors > 0 || st.LongestWrite > 2*time.Second {
		t.Errorf("the application noticed: %d errors %v, longest write %s", st.Errors, l.Problems(3), st.LongestWrite)
	}
	if !strings.Contains(log.String(), "reason=\"disk: datadir+binlog on "+dir) {
		t.Errorf("the throttle did not name the disk (want reason=\"disk: datadir+binlog on %s...)\nlog:\n%s", dir, tail(log.String(), 30))
	}
	db := openControl(t, s)
	if e := engineOf(t, db, "d", "t"); e != "InnoDB" {
		t.Fatalf("engine %s after the run", e)
	}
	n, diffs, err := l.Check(context.Background(), db, "d", "t")
	if err != nil || len(diffs) > 0 {
		t.Fatalf("checked %d rows: %v %v", n, err, diffs)
	}
}

// TestDiskFull: with no reserve (--disk-reserve=0) the copy fills the disk. enginemig recognises
// it, says so, and drops the shadow (--disk-give-up's default, drop) to give the application its
// space back: the original is unchanged with every acknowledged write, and the space is free again.
func TestDiskFull(t *testing.T) {
	s, dir := diskServer(t)
	l, stopLoad := diskLoad(t, s)
	var log logLines
	f := startFiller(t, dir, diskGrown, diskLeft)
	opts := testOptions(s, "d", "t")
	opts.DiskReserve = &diskspace.Reserve{} // no reserve: the path where the disk fills anyway
	log.each = func(line string) { os.Stderr.WriteString("    migration: " + line) }
	opts.Logger = log.logger()
	began := time.Now()
	_, err := Run(context.Background(), openControl(t, s), opts)
	took := time.Since(began)
	free := freeBytes(t, dir)
	time.Sleep(time.Second) // the application writes on after the run
	stopLoad()
	f.end()
	st := l.Stats()
	t.Logf("run took %s; free after it %s; application: %d writes, %d errors, longest write %s; error: %v", took, diskspace.Human(free), st.Acked, st.Errors, st.LongestWrite, err)
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "disk") || !strings.Contains(err.Error(), "shadow table was dropped") {
		t.Fatalf("want exit 6 naming the disk and the dropped shadow, got %d: %v\nlog:\n%s", outcome.CodeOf(err), err, tail(log.String(), 30))
	}
	if !strings.Contains(log.String(), "disk full") {
		t.Errorf("the log does not say the disk is full\nlog:\n%s", tail(log.String(), 30))
	}
	if free < diskLeft {
		t.Errorf("only %s free after the run: the shadow's space was not given back", diskspace.Human(free))
	}
	if st.Errors > 0 {
		t.Errorf("the application saw %d errors: %v", st.Errors, l.Problems(3))
	}
	db := openControl(t, s)
	if tableExists(t, db, "d", "_t_new") || engineOf(t, db, "d", "t") != "MyISAM" {
		t.Fatalf("the shadow is still there, or the original changed")
	}
	n, diffs, err := l.Check(context.Background(), db, "d", "t")
	if err != nil || len(diffs) > 0 {
		t.Fatalf("checked %d rows: %v %v", n, err, diffs)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestDiskPauseLimitKeepsTheShadow: the space does not come back within --disk-pause-limit, and
// with --disk-give-up=keep apply ends with exit 7, the shadow and the progress kept; once the space
// is back the same apply resumes and finishes with every acknowledged write.
func TestDiskPauseLimitKeepsTheShadow(t *testing.T) {
	s, dir := diskServer(t)
	l, stopLoad := diskLoad(t, s)
	var log logLines
	log.each = func(line string) { os.Stderr.WriteString("    migration: " + line) }
	f := startFiller(t, dir, diskGrown, diskHeadroom)
	opts := testOptions(s, "d", "t")
	r := diskspace.Reserve{Bytes: diskReserve}
	opts.DiskReserve = &r
	opts.DiskPauseLimit = 2 * time.Second // the test cannot wait the default's 30 minutes
	opts.DiskKeep = true
	opts.Logger = log.logger()
	db := openControl(t, s)
	_, err := Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.NeedsAttention || !strings.Contains(err.Error(), "--disk-pause-limit") || !strings.Contains(err.Error(), "run the same apply again") {
		stopLoad()
		f.end()
		t.Fatalf("want exit 7 naming the pause limit and the resume, got %d: %v\nlog:\n%s", outcome.CodeOf(err), err, tail(log.String(), 30))
	}
	if !tableExists(t, db, "d", "_t_new") {
		t.Fatal("the shadow was not kept")
	}
	f.release()
	_, err = Run(context.Background(), db, opts)
	stopLoad()
	least := f.end()
	st := l.Stats()
	t.Logf("least free %s; application: %d writes, %d errors, longest write %s", diskspace.Human(least), st.Acked, st.Errors, st.LongestWrite)
	if err != nil {
		t.Fatalf("the resumed run failed: %v\nlog:\n%s", err, tail(log.String(), 30))
	}
	if !strings.Contains(log.String(), "resuming migration") {
		t.Errorf("the second run did not resume")
	}
	if least == 0 || st.Errors > 0 {
		t.Errorf("least free %d, application errors %d %v", least, st.Errors, l.Problems(3))
	}
	n, diffs, err := l.Check(context.Background(), db, "d", "t")
	if err != nil || len(diffs) > 0 || engineOf(t, db, "d", "t") != "InnoDB" {
		t.Fatalf("checked %d rows: %v %v (engine %s)", n, err, diffs, engineOf(t, db, "d", "t"))
	}
}
