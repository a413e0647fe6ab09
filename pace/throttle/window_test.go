package throttle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/pace/window"
)

// TestWindowHoldsTheCopyUntilItOpens: outside its window the copy waits (reason window, saying
// when it opens), and the opening is noticed within about an Interval although nothing is
// measured for it: the log says the copy resumed without anyone asking.
func TestWindowHoldsTheCopyUntilItOpens(t *testing.T) {
	primary := sandboxtest.ForTest(t, sandbox.Options{})
	pdb, err := primary.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	opens := time.Now().Truncate(time.Second).Add(3 * time.Second)
	w, err := window.Parse([]string{opens.Format("15:04:05") + "-" + opens.Add(time.Hour).Format("15:04:05")}, time.Local, "local")
	if err != nil {
		t.Fatal(err)
	}
	var logs logRecorder
	thr := New(pdb, Config{Window: w, Logger: logs.logger()})
	if err := thr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer thr.Stop()
	st := mustBlock(t, thr, "outside the window", "before the window")
	if !strings.Contains(st.Reason, "opens at") || !strings.Contains(st.Reason, "(local time)") {
		t.Errorf("reason %q: want when it opens, in which zone", st.Reason)
	}
	released := make(chan time.Time, 1)
	go func() {
		if thr.Wait(context.Background()) == nil {
			released <- time.Now()
		}
	}()
	time.Sleep(time.Until(opens) + 1200*time.Millisecond)
	resumed := false
	for _, l := range logs.all() {
		resumed = resumed || strings.Contains(l, "copy resumed")
	}
	if !resumed {
		t.Errorf("1.2 s after the window opened, no \"copy resumed\" in the log:\n%s", strings.Join(logs.all(), "\n"))
	}
	select {
	case at := <-released:
		if at.Before(opens) {
			t.Errorf("Wait returned at %s, before the window opened at %s", at.Format("15:04:05.000"), opens.Format("15:04:05"))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Wait still blocked after the window opened: %+v", thr.Status())
	}
	if joined := strings.Join(logs.all(), "\n"); !strings.Contains(joined, "copy throttled") || !strings.Contains(joined, "outside the window") {
		t.Errorf("log:\n%s", joined)
	}
}
