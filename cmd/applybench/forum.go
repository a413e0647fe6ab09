package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The forum shape (-forum): a forum's posts, text with a FULLTEXT index on it, under a forum's
// traffic. The text is words of a fixed vocabulary drawn by a generator seeded with the post's id,
// so one -rows seeds the same table on every run, and the load can draw any seeded post's words
// again, without reading it, to search for words that exist.

const forumDDL = `CREATE TABLE %s (
  id INT UNSIGNED NOT NULL, topic INT UNSIGNED NOT NULL, author INT UNSIGNED NOT NULL,
  posted DATETIME NOT NULL, likes INT NOT NULL DEFAULT 0,
  subject VARCHAR(200) NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (id), KEY topic (topic, posted), KEY author (author), FULLTEXT KEY ft (subject, body)
) ENGINE=MyISAM`

// A forum request's statements, the one place the forum's proportions are stated: a page
// reads posts, some pages search, readers like what they read, and a few of them write.
const (
	forumReads    = 12 // a post read by id
	forumSearches = 3  // a boolean FULLTEXT search for two words, LIMIT 20
	forumLikes    = 4  // a post's likes counted up, by id
	forumNewPosts = 1  // a new post, its id above every seeded one
)

// forumMixText is the proportions for the help and the run's first line.
var forumMixText = fmt.Sprintf("%d reads : %d searches : %d likes : %d new post a request",
	forumReads, forumSearches, forumLikes, forumNewPosts)

const (
	// forumSeed is any fixed number: the table's text is a function of it and the posts' ids.
	forumSeed = 0x5eedf0
	// vocabularySize: with 40 words a body, each word is in about 1 % of the posts, and two of
	// them together in about one post in 10,000 (beside the post a search drew them from).
	vocabularySize = 4000
	// Words a post's subject and body have: drawn evenly between these, 40 a body on average.
	subjectMin, subjectMax = 3, 8
	bodyMin, bodyMax       = 30, 50
	// A topic has about 20 posts, an author about 50.
	postsPerTopic, postsPerAuthor = 20, 50
	// seedBatch is the posts one INSERT of the seed carries: about 700 KB of text, well under
	// the server's max_allowed_packet (16 MB).
	seedBatch = 2000
	// seedSortBuffer is the seed's myisam_sort_buffer_size, for its FULLTEXT index.
	seedSortBuffer = 1 << 30
)

// forumEpoch is the time of post 0; post n was written n minutes later.
var forumEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// The vocabulary's letters. Without b, no six-letter word of consonants and vowels in turn is
// one of MyISAM's stopwords (with it, "before" and "beside" are), so both engines index every word.
const consonants, vowels = "dfgklmnprstvz", "aeiou"

// vocabulary draws n distinct words of six letters, consonant and vowel in turn: longer than
// either engine's shortest indexed word (MyISAM's ft_min_word_len 4, InnoDB's
// innodb_ft_min_token_size 3).
func vocabulary(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0))
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	for len(words) < n {
		var w [6]byte
		for i := range w {
			if i%2 == 0 {
				w[i] = consonants[r.IntN(len(consonants))]
			} else {
				w[i] = vowels[r.IntN(len(vowels))]
			}
		}
		if s := string(w[:]); !seen[s] {
			seen[s] = true
			words = append(words, s)
		}
	}
	return words
}

// drawWords draws between lo and hi words of vocab, each evenly.
func drawWords(r *rand.Rand, vocab []string, lo, hi int) []string {
	out := make([]string, lo+r.IntN(hi-lo+1))
	for i := range out {
		out[i] = vocab[r.IntN(len(vocab))]
	}
	return out
}

// post is one row of posts.
type post struct {
	id, topic, author, likes int
	posted                   string
	subject, body            []string
}

// forumShape is the forum's posts table and its traffic.
type forumShape struct {
	vocab []string
	// nextID is the last post id the seed or the load used: new posts take the next one, above
	// every seeded post, so that the load's threads never collide on a key.
	nextID atomic.Int64
	mix    []*statement
}

func newForumShape() *forumShape {
	f := &forumShape{vocab: vocabulary(vocabularySize, forumSeed)}
	f.mix = interleave(
		&statement{name: "read", per: forumReads, exec: f.read},
		&statement{name: "search", per: forumSearches, exec: f.search},
		&statement{name: "like", write: true, per: forumLikes, exec: f.like},
		&statement{name: "new post", write: true, per: forumNewPosts, exec: f.newPost})
	return f
}

func (f *forumShape) table() string { return "posts" }

func (f *forumShape) request(int) []*statement { return f.mix }

// drawPost is post id of a table seeded with rows posts, from a generator of its own: the same
// post whenever it is drawn.
func (f *forumShape) drawPost(id, rows int) post {
	r := rand.New(rand.NewPCG(forumSeed, uint64(id)))
	p := post{id: id, topic: 1 + r.IntN(max(rows/postsPerTopic, 1)), author: 1 + r.IntN(max(rows/postsPerAuthor, 1)),
		likes: r.IntN(10), posted: forumEpoch.Add(time.Duration(id) * time.Minute).Format(time.DateTime)}
	p.subject = drawWords(r, f.vocab, subjectMin, subjectMax)
	p.body = drawWords(r, f.vocab, bodyMin, bodyMax)
	return p
}

// searchTerms is a boolean search for two words at different places of body, both required.
func searchTerms(r *rand.Rand, body []string) string {
	i := r.IntN(len(body))
	j := (i + 1 + r.IntN(len(body)-1)) % len(body)
	return "+" + body[i] + " +" + body[j]
}

func (f *forumShape) read(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error {
	var topic, author, likes int
	var posted, subject, body string
	// No post is ever deleted: one missing is a failed request.
	return db.QueryRowContext(ctx, "SELECT topic, author, posted, likes, subject, body FROM posts WHERE id = ?",
		1+r.IntN(rows)).Scan(&topic, &author, &posted, &likes, &subject, &body)
}

// search looks for two words of a seeded post, as a reader looks for something once read: words
// that exist, and at least that post to find.
func (f *forumShape) search(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error {
	terms := searchTerms(r, f.drawPost(1+r.IntN(rows), rows).body)
	res, err := db.QueryContext(ctx, "SELECT id, subject FROM posts WHERE MATCH (subject, body) AGAINST (? IN BOOLEAN MODE) LIMIT 20", terms)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var id int
		var subject string
		if err := res.Scan(&id, &subject); err != nil {
			return err
		}
	}
	return res.Err()
}

func (f *forumShape) like(ctx context.Context, db *sql.DB, r *rand.Rand, rows int) error {
	_, err := db.ExecContext(ctx, "UPDATE posts SET likes = likes + 1 WHERE id = ?", 1+r.IntN(rows))
	return err
}

func (f *forumShape) newPost(ctx context.Context, db *sql.DB, _ *rand.Rand, rows int) error {
	p := f.drawPost(int(f.nextID.Add(1)), rows)
	_, err := db.ExecContext(ctx, "INSERT INTO posts (id, topic, author, posted, subject, body) VALUES (?, ?, ?, ?, ?, ?)",
		p.id, p.topic, p.author, p.posted, strings.Join(p.subject, " "), strings.Join(p.body, " "))
	return err
}

func (f *forumShape) seed(db *sql.DB, name string, rows int) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+name+", _"+name+"_old, _"+name+"_new"); err != nil {
		return err
	}
	f.nextID.Store(int64(rows))
	// The secondary indexes, the FULLTEXT one above all, are built once at the end by sorting
	// (ENABLE KEYS) rather than row by row, in a sort buffer of the session's own: with the
	// server's 128 MB, the sort of 100,000 and 300,000 posts' words took two to three times as long.
	for _, q := range []string{fmt.Sprintf(forumDDL, name), "ALTER TABLE " + name + " DISABLE KEYS",
		"SET SESSION myisam_sort_buffer_size = " + strconv.Itoa(seedSortBuffer)} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for lo := 1; lo <= rows; lo += seedBatch {
		if _, err := conn.ExecContext(ctx, f.insertPosts(name, lo, min(lo+seedBatch-1, rows), rows)); err != nil {
			return fmt.Errorf("seed %s: %w", name, err)
		}
	}
	for _, q := range []string{"ALTER TABLE " + name + " ENABLE KEYS", "FLUSH TABLES " + name} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// insertPosts is one INSERT of posts lo to hi. The values are written into the statement as they
// are: numbers, a date, and the vocabulary's letters and spaces, nothing to escape.
func (f *forumShape) insertPosts(name string, lo, hi, rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + name + " (id, topic, author, posted, likes, subject, body) VALUES ")
	for id := lo; id <= hi; id++ {
		p := f.drawPost(id, rows)
		if id > lo {
			b.WriteByte(',')
		}
		b.WriteString("(" + strconv.Itoa(p.id) + "," + strconv.Itoa(p.topic) + "," + strconv.Itoa(p.author) +
			",'" + p.posted + "'," + strconv.Itoa(p.likes) + ",'" + strings.Join(p.subject, " ") + "','" + strings.Join(p.body, " ") + "')")
	}
	return b.String()
}
