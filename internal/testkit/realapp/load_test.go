package realapp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The load: six web clients, as in the manual run. Each starts a request on a fixed grid
// (a slot missed while a request waited is lost, as a user who gave up), so the load is an
// application's, not a benchmark's: on 2 cores PHP's page rendering would otherwise take every
// core and leave apply's automatic pace nothing to measure but a saturated machine.
const (
	viewers     = 3 // page views (index.php), the latency the test reports
	searchers   = 1 // full-text searches through the API (searchindex: a MyISAM FULLTEXT table), of pages not edited
	editors     = 2 // edits through the API, each of pages of its own, in the first editedPages
	viewEvery   = 200 * time.Millisecond
	searchEvery = 200 * time.Millisecond
	editEvery   = 400 * time.Millisecond
	phpWorkers  = viewers + searchers + editors + 2 // one process per request in flight, and room
	seedPages   = 24
	// The editors edit the first editedPages pages, the searcher searches the others: once
	// searchindex is InnoDB, a search in a transaction whose snapshot is older than the page's last
	// edit (MediaWiki searches inside its request's transaction; an edit REPLACEs the page's
	// searchindex row) finds nothing, an answer MyISAM never gives and the swap does not cause
	// (plan's fulltext warning names it). The search of every page after the load checks the
	// edited ones.
	editedPages = seedPages / 2
)

const pagePrefix = "Load test page "

func pageTitle(n int) string { return pagePrefix + strconv.Itoa(n) }

// pageToken is a word only page n holds, in every revision: page views and searches look for it.
func pageToken(n int) string { return "emtoken" + strconv.Itoa(n) }

// request is one finished request, for the latency report.
type request struct {
	kind  string // view, search, edit
	start time.Time
	took  time.Duration
}

// ackedEdit is an edit MediaWiki acknowledged: the revision it made and the text it holds.
type ackedEdit struct {
	page  int
	revid int64
	text  string
}

// load runs the clients and records every request, every failure and every acknowledged edit.
type load struct {
	w      *wiki
	client *http.Client

	mu       sync.Mutex
	reqs     []request
	failures []string
	acks     []ackedEdit
	unsure   map[int]bool // pages with an edit that failed: it may or may not have been saved
	wg       sync.WaitGroup
}

func newLoad(w *wiki) *load {
	return &load{w: w, client: &http.Client{Timeout: time.Minute}, unsure: map[int]bool{}}
}

func (l *load) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, time.Now().UTC().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (l *load) record(kind string, start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, request{kind: kind, start: start, took: time.Since(start)})
}

// seed creates the pages the clients use, through the API as an editor would, one at a time:
// four at once on the wiki's MyISAM tables, before apply ran, once failed an edit with MediaWiki's
// DBQueryError (1 run of 10), which the test is not about.
func (l *load) seed(t *testing.T) {
	t.Helper()
	for n := 0; n < seedPages; n++ {
		l.edit(n, pageToken(n)+"\n\nA page of the load test, as first written.")
	}
	if len(l.failures) > 0 {
		t.Fatalf("seeding the wiki's pages: %s", strings.Join(l.failures, "\n"))
	}
	l.reqs = nil
}

// start runs the clients until ctx ends; wait returns once their last requests are answered
// (requests in flight are not cancelled: a cancelled request would be an error the wiki never had).
func (l *load) start(ctx context.Context) {
	for v := 0; v < viewers; v++ {
		n := v
		l.paced(ctx, viewEvery, v, viewers, func() { l.view(n); n = (n + viewers) % seedPages })
	}
	for s := 0; s < searchers; s++ {
		n := s
		l.paced(ctx, searchEvery, s, searchers, func() {
			l.search(editedPages + n)
			n = (n + searchers*5) % (seedPages - editedPages)
		})
	}
	for e := 0; e < editors; e++ {
		n, rev := e, 0
		l.paced(ctx, editEvery, e, editors, func() {
			rev++
			l.edit(n, fmt.Sprintf("%s\n\nRevision %d of this page by editor %d.", pageToken(n), rev, e))
			n = (n + editors) % editedPages
		})
	}
}

func (l *load) wait() { l.wg.Wait() }

// paced runs fn on a grid of period every, client i of n starting i/n of a period late.
func (l *load) paced(ctx context.Context, every time.Duration, i, n int, fn func()) {
	l.wg.Go(func() {
		next := time.Now().Add(every * time.Duration(i) / time.Duration(n))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			fn()
			next = next.Add(every)
			if now := time.Now(); next.Before(now) {
				next = now
			}
		}
	})
}

// get fetches path and returns the status and body; a transport error is a failure of kind.
func (l *load) get(kind, path string) (int, []byte, bool) {
	resp, err := l.client.Get(l.w.url + path)
	return l.read(kind, path, resp, err)
}

func (l *load) read(kind, what string, resp *http.Response, err error) (int, []byte, bool) {
	if err != nil {
		l.fail("%s %s: %v", kind, what, err)
		return 0, nil, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		l.fail("%s %s: read the response: %v", kind, what, err)
		return 0, nil, false
	}
	return resp.StatusCode, body, true
}

// view fetches page n as a reader does and checks it is the page.
func (l *load) view(n int) {
	start := time.Now()
	path := "/index.php?title=" + url.QueryEscape(strings.ReplaceAll(pageTitle(n), " ", "_"))
	status, body, ok := l.get("view", path)
	if !ok {
		return
	}
	l.record("view", start)
	if status != http.StatusOK || !strings.Contains(string(body), pageToken(n)) {
		l.fail("view %s: HTTP %d, want 200 with %q: %s", pageTitle(n), status, pageToken(n), snippet(body))
	}
}

// search searches for page n's word and checks the page is found.
func (l *load) search(n int) {
	start := time.Now()
	path := "/api.php?action=query&list=search&srwhat=text&format=json&formatversion=2&srsearch=" + pageToken(n)
	status, body, ok := l.get("search", path)
	if !ok {
		return
	}
	l.record("search", start)
	var r struct {
		Error *apiError
		Query struct{ Search []struct{ Title string } }
	}
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Error != nil {
		l.fail("search %s: HTTP %d: %s", pageToken(n), status, snippet(body))
		return
	}
	if len(r.Query.Search) != 1 || r.Query.Search[0].Title != pageTitle(n) {
		l.fail("search %s: found %v, want only %q", pageToken(n), r.Query.Search, pageTitle(n))
	}
}

type apiError struct{ Code, Info string }

// edit saves text as page n's new revision, anonymously (the anonymous edit token is "+\"), and
// remembers it when MediaWiki acknowledges it.
func (l *load) edit(n int, text string) {
	start := time.Now()
	form := url.Values{"action": {"edit"}, "title": {pageTitle(n)}, "text": {text}, "summary": {"load test"},
		"token": {`+\`}, "format": {"json"}, "formatversion": {"2"}}
	resp, err := l.client.PostForm(l.w.url+"/api.php", form)
	status, body, ok := l.read("edit", pageTitle(n), resp, err)
	if ok {
		l.record("edit", start)
	}
	var r struct {
		Error *apiError
		Edit  struct {
			Result   string
			NewRevID int64
		}
	}
	if ok && status == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Error == nil &&
		r.Edit.Result == "Success" && r.Edit.NewRevID > 0 {
		l.mu.Lock()
		l.acks = append(l.acks, ackedEdit{page: n, revid: r.Edit.NewRevID, text: text})
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	l.unsure[n] = true
	l.mu.Unlock()
	if ok {
		l.fail("edit %s: HTTP %d, want 200 with a new revision: %s", pageTitle(n), status, snippet(body))
	}
}

// markup is what snippet leaves out of an HTML answer: scripts, styles and tags, so that an
// error page's message shows (its <head> alone is longer than a snippet).
var markup = regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>`)

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(markup.ReplaceAllString(string(b), " ")), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
