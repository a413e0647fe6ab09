package table

import (
	"reflect"
	"strings"
	"testing"
)

// postsInfo is a forum's posts table as Load describes it: two FULLTEXT indexes, a plain and a
// unique secondary index, and a SPATIAL one.
func postsInfo() *Info {
	col := func(name, typ string) Column { return Column{Name: name, DataType: typ, ColumnType: typ} }
	ix := func(name, typ string, unique bool, cols ...string) Index {
		var ic []IndexColumn
		for _, c := range cols {
			ic = append(ic, IndexColumn{Name: c})
		}
		return Index{Name: name, Type: typ, Unique: unique, Columns: ic}
	}
	return &Info{Schema: "forum", Name: "posts", Engine: "MyISAM",
		Columns: []Column{{Name: "id", DataType: "int", ColumnType: "int(11)", Extra: "auto_increment"}, col("subject", "varchar"), col("body", "text"),
			col("author", "int"), col("slug", "varchar"), col("place", "point")},
		Indexes: []Index{ix("PRIMARY", "BTREE", true, "id"), ix("slug", "BTREE", true, "slug"), ix("author", "BTREE", false, "author"),
			ix("ft_all", "FULLTEXT", false, "subject", "body"), ix("ft_subject", "FULLTEXT", false, "subject"), ix("place", "SPATIAL", false, "place")},
		CreateSQL: "CREATE TABLE `posts` (\n" +
			"  `id` int(11) NOT NULL AUTO_INCREMENT,\n" +
			"  `subject` varchar(200) NOT NULL,\n" +
			"  `body` text NOT NULL,\n" +
			"  `author` int(11) NOT NULL,\n" +
			"  `slug` varchar(100) NOT NULL,\n" +
			"  `place` point NOT NULL,\n" +
			"  PRIMARY KEY (`id`),\n" +
			"  UNIQUE KEY `slug` (`slug`),\n" +
			"  KEY `author` (`author`),\n" +
			"  SPATIAL KEY `place` (`place`),\n" +
			"  FULLTEXT KEY `ft_all` (`subject`,`body`),\n" +
			"  FULLTEXT KEY `ft_subject` (`subject`)\n" +
			") ENGINE=MyISAM AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
	}
}

// FULLTEXT indexes are deferred like plain ones; the shadow is created with the first of them,
// for InnoDB's hidden document id, and drops it at once; SPATIAL stays.
func TestShadowDefersFulltextKeepingTheDocumentID(t *testing.T) {
	d, err := postsInfo().Shadow("_posts_new", true, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"UNIQUE KEY `slug` (`slug`)", "KEY `author` (`author`)", "FULLTEXT KEY `ft_all` (`subject`,`body`)", "FULLTEXT KEY `ft_subject` (`subject`)"}
	if !reflect.DeepEqual(d.Deferred, want) {
		t.Fatalf("deferred %q, want %q", d.Deferred, want)
	}
	for _, in := range []string{"SPATIAL KEY `place`", "FULLTEXT KEY `ft_all` (`subject`,`body`)", "PRIMARY KEY (`id`)"} {
		if !strings.Contains(d.Create, in) {
			t.Errorf("create lacks %q:\n%s", in, d.Create)
		}
	}
	for _, out := range []string{"ft_subject", "KEY `author`", "UNIQUE KEY"} {
		if strings.Contains(d.Create, out) {
			t.Errorf("create has %q, which is built after the copy:\n%s", out, d.Create)
		}
	}
	if want := "ALTER TABLE `forum`.`_posts_new` DROP INDEX `ft_all`"; d.DropFulltext != want {
		t.Fatalf("drop %q, want %q", d.DropFulltext, want)
	}
}

// Without deferral (a Galera node, plan's and the answers check's scratch tables) every index is
// created with the table and nothing is dropped; a table without FULLTEXT drops nothing either.
func TestShadowWithoutFulltextOrDeferralDropsNothing(t *testing.T) {
	ti := postsInfo()
	d, err := ti.Shadow("_posts_new", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if d.DropFulltext != "" || len(d.Deferred) != 0 || !strings.Contains(d.Create, "ft_subject") || !strings.Contains(d.Create, "KEY `author`") {
		t.Fatalf("all indexes up front: drop %q, deferred %q\n%s", d.DropFulltext, d.Deferred, d.Create)
	}
	lines := strings.Split(ti.CreateSQL, "\n")
	ti.CreateSQL = strings.Join(append(append(lines[:9:9], "  KEY `author` (`author`)"), lines[len(lines)-1]), "\n")
	ti.Indexes = ti.Indexes[:3]
	if d, err = ti.Shadow("_posts_new", true, false); err != nil {
		t.Fatal(err)
	}
	if d.DropFulltext != "" || len(d.Deferred) != 2 || strings.Contains(d.Create, "FULLTEXT") {
		t.Fatalf("no FULLTEXT: drop %q, deferred %q\n%s", d.DropFulltext, d.Deferred, d.Create)
	}
}

// Each FULLTEXT index is an ALTER of its own (InnoDB builds one at a time) with LOCK=SHARED (it
// refuses LOCK=NONE); the others are one online ALTER, last.
func TestAddIndexesDDLBuildsFulltextAloneAndFirst(t *testing.T) {
	d, err := postsInfo().Shadow("_posts_new", true, false)
	if err != nil {
		t.Fatal(err)
	}
	got := AddIndexesDDL("forum", "_posts_new", d.Deferred)
	want := []IndexBuild{
		{DDL: "ALTER TABLE `forum`.`_posts_new` ADD FULLTEXT KEY `ft_all` (`subject`,`body`), ALGORITHM=INPLACE, LOCK=SHARED", Fulltext: true},
		{DDL: "ALTER TABLE `forum`.`_posts_new` ADD FULLTEXT KEY `ft_subject` (`subject`), ALGORITHM=INPLACE, LOCK=SHARED", Fulltext: true},
		{DDL: "ALTER TABLE `forum`.`_posts_new` ADD UNIQUE KEY `slug` (`slug`), ADD KEY `author` (`author`), ALGORITHM=INPLACE, LOCK=NONE"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("builds\n%+v\nwant\n%+v", got, want)
	}
	if got := AddIndexesDDL("forum", "_posts_new", d.Deferred[:2]); len(got) != 1 || got[0].Fulltext {
		t.Fatalf("plain indexes alone: %+v", got)
	}
	if got := AddIndexesDDL("forum", "_posts_new", nil); len(got) != 0 {
		t.Fatalf("nothing to build: %+v", got)
	}
	for def, name := range map[string]string{d.Deferred[0]: "slug", d.Deferred[1]: "author", d.Deferred[2]: "ft_all"} {
		if n, ok := IndexDefinitionName(def); !ok || n != name {
			t.Errorf("IndexDefinitionName(%q) = %q, %v; want %q", def, n, ok, name)
		}
	}
}
