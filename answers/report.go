package answers

import (
	"fmt"
	"io"
)

// WriteText prints the report: each statement whose answer changes, by its text, with its causes
// and remedies and the digest that accepts it; then a count of those that stay.
func (r Report) WriteText(w io.Writer) error {
	same, skipped := 0, 0
	fmt.Fprintf(w, "answers of %s.%s: the application's statements on a MyISAM and an InnoDB copy of the same %d rows", r.Schema, r.Table, r.Rows)
	if r.Partial {
		fmt.Fprint(w, " (the table has more: answers that depend on every row may differ on the live table)")
	}
	fmt.Fprintln(w)
	for _, f := range r.Findings {
		switch {
		case f.Skipped != "":
			skipped++
			continue
		case !f.Differs:
			same++
			continue
		}
		state := "CHANGES"
		if f.Accepted {
			state = "changes (accepted)"
		}
		fmt.Fprintf(w, "\n%s %s: %s (MyISAM %d rows, InnoDB %d rows)\n  %s\n", state, f.Digest, map[string]string{"rows": "other rows", "order": "same rows, other order"}[f.Kind], f.MyISAMRows, f.InnoDBRows, f.Statement)
		for _, c := range f.Causes {
			fmt.Fprintf(w, "  why [%s]: %s\n  remedy: %s\n", c.Code, c.Says, c.Remedy)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d statement(s) answer differently and are not accepted, %d answer the same, %d not compared\n", len(r.Differing()), same, skipped)
	return err
}
