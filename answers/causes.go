package answers

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Cause is why a statement's answer changes with the engine, in words, and what to do.
type Cause struct {
	Code   string `json:"code"`
	Says   string `json:"says"`
	Remedy string `json:"remedy"`
}

// Cause codes.
const (
	CauseThreshold    = "fulltext-50-percent"
	CauseStopword     = "fulltext-stopword"
	CauseTokenSize    = "fulltext-token-size"
	CauseRanking      = "fulltext-ranking"
	CauseLimitNoOrder = "limit-without-order-by"
	CauseOrderNoOrder = "order-without-order-by"
	CauseOrderTies    = "order-by-ties"
	CauseOther        = "other"
)

// words tells, for each word searched, whether each engine indexes it: found by asking the server
// (a one-column probe table per engine with the word as a row, searched in boolean mode, which has
// no 50% threshold), so the answer follows the server's own stopword lists, ft_stopword_file and
// token sizes, whatever they are.
type words struct {
	myisam, innodb map[string]bool // indexed
	myisamMin      int             // ft_min_word_len
	innodbMin      int             // innodb_ft_min_token_size
}

// probeWords builds the probes for every word of the statements' searches.
func probeWords(ctx context.Context, db *sql.DB, scratch, prefix string, all []string) (*words, error) {
	w := &words{myisam: map[string]bool{}, innodb: map[string]bool{}}
	if len(all) == 0 {
		return w, nil
	}
	if err := db.QueryRowContext(ctx, "SELECT @@ft_min_word_len, @@innodb_ft_min_token_size").Scan(&w.myisamMin, &w.innodbMin); err != nil {
		return nil, fmt.Errorf("full-text settings: %w", err)
	}
	for _, engine := range []string{"MyISAM", "InnoDB"} {
		probe := dbconn.QualifiedName(scratch, prefix+"_probe_"+strings.ToLower(engine)) // the pair's: checks side by side
		stmts := []string{"DROP TABLE IF EXISTS " + probe,
			"CREATE TABLE " + probe + " (id INT AUTO_INCREMENT PRIMARY KEY, w VARCHAR(200), FULLTEXT (w)) ENGINE=" + engine + " DEFAULT CHARSET=utf8mb4"}
		for _, s := range stmts {
			if _, err := db.ExecContext(ctx, s); err != nil {
				return nil, fmt.Errorf("full-text probe: %w", err)
			}
		}
		defer db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+probe)
		for _, word := range all {
			if _, err := db.ExecContext(ctx, "INSERT INTO "+probe+" (w) VALUES (?)", word); err != nil {
				return nil, fmt.Errorf("full-text probe: %w", err)
			}
		}
		into := w.myisam
		if engine == "InnoDB" {
			into = w.innodb
		}
		for _, word := range all {
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+probe+" WHERE MATCH (w) AGAINST (? IN BOOLEAN MODE)", `+"`+word+`"`).Scan(&n); err != nil {
				return nil, fmt.Errorf("full-text probe of %q: %w", word, err)
			}
			into[word] = n > 0
		}
	}
	return w, nil
}

// wordCauses names the searched words one engine ignores and the other does not.
func (w *words) wordCauses(s search) []Cause {
	var out []Cause
	for _, word := range s.words() {
		my, inno := w.myisam[word], w.innodb[word]
		if my == inno {
			continue
		}
		ignoring, indexing, min := "MyISAM", "InnoDB", w.myisamMin
		setting, value := "ft_min_word_len", w.innodbMin
		if my {
			ignoring, indexing, min = "InnoDB", "MyISAM", w.innodbMin
			setting, value = "innodb_ft_min_token_size", w.myisamMin
		}
		if len([]rune(word)) < min {
			out = append(out, Cause{Code: CauseTokenSize,
				Says:   fmt.Sprintf("%q has %d letters: %s indexes words of %d or more, %s indexes it", word, len([]rune(word)), ignoring, min, indexing),
				Remedy: fmt.Sprintf("set %s = %d in the server's configuration (a restart, then the FULLTEXT indexes rebuilt) to make them equal, or accept the new answer", setting, value)})
			continue
		}
		out = append(out, Cause{Code: CauseStopword,
			Says:   fmt.Sprintf("%q is a stopword for %s and not for %s", word, ignoring, indexing),
			Remedy: "give InnoDB the stopwords MyISAM uses (innodb_ft_server_stopword_table before the FULLTEXT index is built), or accept the new answer"})
	}
	return out
}

// thresholdCause: a natural-language search for a word found in more than half of the rows,
// which MyISAM treats as a stopword for that search and InnoDB does not.
func thresholdCause(ctx context.Context, db *sql.DB, table string, s search, rows int64) []Cause {
	if s.boolean || rows == 0 {
		return nil
	}
	var out []Cause
	for _, word := range s.words() {
		var n int64
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE MATCH (%s) AGAINST (? IN BOOLEAN MODE)", table, s.columns)
		if db.QueryRowContext(ctx, q, `+"`+word+`"`).Scan(&n) != nil || 2*n <= rows {
			continue
		}
		out = append(out, Cause{Code: CauseThreshold,
			Says:   fmt.Sprintf("%q is in %d of %d rows: MyISAM's natural-language search ignores a word found in more than half of the rows, InnoDB's does not", word, n, rows),
			Remedy: "nothing makes the engines equal here: if the application relied on it, search IN BOOLEAN MODE or filter such words itself; or accept the new answer"})
	}
	return out
}
