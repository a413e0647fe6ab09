package plan

import (
	"fmt"
	"strings"
)

func init() {
	registerTable("fulltext", Warning,
		"FULLTEXT index: InnoDB adds FTS_DOC_ID, uses different token sizes and has no 50% threshold, and a search inside a transaction misses rows changed since its snapshot, so search results change",
		checkFulltext)
	registerTable("spatial", Info, "SPATIAL index: supported by InnoDB (columns must be NOT NULL; MySQL 8 needs an SRID for the index to be used)", checkSpatial)
}

func indexesOfType(in *TableInput, typ string) []string {
	if in.Info == nil {
		return nil
	}
	var out []string
	for _, ix := range in.Info.Indexes {
		if ix.Type == typ {
			out = append(out, ix.Name)
		}
	}
	return out
}

func checkFulltext(in *TableInput) []Finding {
	ix := indexesOfType(in, "FULLTEXT")
	if len(ix) == 0 {
		return nil
	}
	settings := "ft_min_word_len / innodb_ft_min_token_size unknown"
	remedy := "run `enginemig answers` on the table: it names each of the application's searches whose results change and why (apply runs it first when the server keeps the statements)"
	if s := in.Server; s != nil {
		settings = fmt.Sprintf("MyISAM ft_min_word_len=%s ft_max_word_len=%s ft_stopword_file=%s vs InnoDB innodb_ft_min_token_size=%s innodb_ft_max_token_size=%s innodb_ft_enable_stopword=%s",
			orDash(s.Var("ft_min_word_len")), orDash(s.Var("ft_max_word_len")), orDash(s.Var("ft_stopword_file")),
			orDash(s.Var("innodb_ft_min_token_size")), orDash(s.Var("innodb_ft_max_token_size")), orDash(s.Var("innodb_ft_enable_stopword")))
		remedy += tokenSizeRemedy(s.Var("ft_min_word_len"), s.Var("innodb_ft_min_token_size"), "min")
		remedy += tokenSizeRemedy(s.Var("ft_max_word_len"), s.Var("innodb_ft_max_token_size"), "max")
	}
	return []Finding{newFinding("fulltext", Warning,
		fmt.Sprintf("FULLTEXT index %s: InnoDB full-text search returns different results (no 50%% threshold, other relevance values, token sizes: %s; a search inside a transaction does not find a row changed since the transaction's snapshot, which MyISAM finds) and adds a hidden FTS_DOC_ID column",
			strings.Join(ix, ", "), settings),
		remedy+"; apply builds the InnoDB index with the stopwords MyISAM uses")}
}

// tokenSizeRemedy says which InnoDB setting makes words of MyISAM's length limit count the same
// ("" when they already do or a value is unknown). Only a restart changes it, and then every
// InnoDB FULLTEXT index of the server must be rebuilt.
func tokenSizeRemedy(myisam, innodb, which string) string {
	if myisam == "" || innodb == "" || myisam == innodb {
		return ""
	}
	return fmt.Sprintf("; to index the same words, set innodb_ft_%s_token_size=%s (now %s) in the server's configuration: it needs a restart and applies to every InnoDB FULLTEXT index, which must then be rebuilt (OPTIMIZE TABLE with innodb_optimize_fulltext_only=OFF, or ALTER TABLE ... FORCE)", which, myisam, innodb)
}

func checkSpatial(in *TableInput) []Finding {
	ix := indexesOfType(in, "SPATIAL")
	if len(ix) == 0 {
		return nil
	}
	msg := fmt.Sprintf("SPATIAL index %s: InnoDB supports it", strings.Join(ix, ", "))
	if in.Server != nil && !in.Server.MariaDB() && in.Server.AtLeast(8, 0, 0) {
		msg += "; MySQL 8 ignores a spatial index for queries unless the column has an SRID attribute"
	}
	return []Finding{newFinding("spatial", Info, msg, "check spatial queries' plans (EXPLAIN) on a converted copy")}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
