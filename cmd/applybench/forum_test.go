package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The vocabulary is the same for a seed and another for another seed; its words are distinct, six
// letters of consonants and vowels in turn, never with b (which spells MyISAM's stopwords).
func TestVocabularyIsFixedByItsSeed(t *testing.T) {
	v := vocabulary(vocabularySize, forumSeed)
	if !slices.Equal(v, vocabulary(vocabularySize, forumSeed)) {
		t.Fatal("the same seed drew another vocabulary")
	}
	if slices.Equal(v[:10], vocabulary(10, forumSeed+1)) {
		t.Error("another seed drew the same words")
	}
	seen := map[string]bool{}
	for _, w := range v {
		if seen[w] {
			t.Fatalf("%q drawn twice", w)
		}
		seen[w] = true
		if len(w) != 6 || strings.ContainsRune(w, 'b') {
			t.Fatalf("%q: want six letters without b", w)
		}
		for i := range w {
			if set := []string{consonants, vowels}[i%2]; !strings.ContainsRune(set, rune(w[i])) {
				t.Fatalf("%q: letter %d is not one of %q", w, i, set)
			}
		}
	}
	if len(v) != vocabularySize {
		t.Errorf("%d words, want %d", len(v), vocabularySize)
	}
}

// A post is the same whenever it is drawn (the searches draw seeded posts again); its subject and
// body are the vocabulary's words, 3-8 and 30-50 of them, about 40 a body on average, each word
// about as frequent as any other; its topic and author are among the table's.
func TestPostsAreDrawnAlikeFromTheVocabulary(t *testing.T) {
	f := newForumShape()
	const rows = 10000
	inVocab := map[string]bool{}
	for _, w := range f.vocab {
		inVocab[w] = true
	}
	count := map[string]int{}
	words := 0
	for id := 1; id <= rows; id++ {
		p := f.drawPost(id, rows)
		if q := f.drawPost(id, rows); !slices.Equal(p.body, q.body) || !slices.Equal(p.subject, q.subject) || p.topic != q.topic {
			t.Fatalf("post %d drawn twice differs", id)
		}
		if len(p.subject) < subjectMin || len(p.subject) > subjectMax || len(p.body) < bodyMin || len(p.body) > bodyMax {
			t.Fatalf("post %d: %d words of subject, %d of body", id, len(p.subject), len(p.body))
		}
		if p.topic < 1 || p.topic > rows/postsPerTopic || p.author < 1 || p.author > rows/postsPerAuthor {
			t.Fatalf("post %d: topic %d, author %d", id, p.topic, p.author)
		}
		for _, w := range append(p.subject, p.body...) {
			if !inVocab[w] {
				t.Fatalf("post %d: %q is not in the vocabulary", id, w)
			}
			count[w]++
		}
		words += len(p.body)
	}
	if mean := float64(words) / rows; mean < 39.5 || mean > 40.5 {
		t.Errorf("%.2f words a body on average, want about 40", mean)
	}
	// 10,000 posts of about 45 words: about 112 each of 4,000 words, evenly drawn.
	lo, hi := rows, 0
	for _, w := range f.vocab {
		lo, hi = min(lo, count[w]), max(hi, count[w])
	}
	if lo < 60 || hi > 180 {
		t.Errorf("a word drawn %d to %d times, want each near 112", lo, hi)
	}
}

// A search asks for two words of the post at two different places, both required.
func TestSearchTermsAreTwoWordsOfThePost(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	body := []string{"dakota", "ferine", "gozuma", "kilavo"}
	seen := map[string]bool{}
	for range 1000 {
		terms := searchTerms(r, body)
		f := strings.Fields(terms)
		if len(f) != 2 || f[0][0] != '+' || f[1][0] != '+' || f[0] == f[1] ||
			!slices.Contains(body, f[0][1:]) || !slices.Contains(body, f[1][1:]) {
			t.Fatalf("%q: want +a +b, two different words of %v", terms, body)
		}
		seen[terms] = true
	}
	if len(seen) != 12 {
		t.Errorf("%d different searches of 4 words, want all 12 ordered pairs", len(seen))
	}
}

// A forum request is 12 reads, 3 searches, 4 likes and 1 new post, every request alike,
// interleaved a round at a time; likes and new posts count as writes.
func TestForumRequestKeepsItsProportions(t *testing.T) {
	f := newForumShape()
	for n := range 20 {
		kinds := map[string]int{}
		writes := 0
		for _, st := range f.request(n) {
			kinds[st.name]++
			if st.write {
				writes++
			}
		}
		if kinds["read"] != forumReads || kinds["search"] != forumSearches || kinds["like"] != forumLikes || kinds["new post"] != forumNewPosts || len(kinds) != 4 {
			t.Fatalf("request %d: %v, want %s", n, kinds, forumMixText)
		}
		if writes != forumLikes+forumNewPosts {
			t.Errorf("request %d: %d writes, want the likes and the new post", n, writes)
		}
	}
	if forumMixText != "12 reads : 3 searches : 4 likes : 1 new post a request" {
		t.Errorf("proportions: %s", forumMixText)
	}
	var order []string
	for _, st := range f.request(0)[:6] {
		order = append(order, st.name)
	}
	if got := strings.Join(order, ", "); got != "read, search, like, new post, read, search" {
		t.Errorf("request starts %s, want a round of each kind in turn", got)
	}
}

// The seed's INSERT carries the posts as drawn, quoted as they are.
func TestSeedInsertCarriesThePosts(t *testing.T) {
	f := newForumShape()
	q := f.insertPosts("posts", 3, 4, 100)
	p := f.drawPost(4, 100)
	want := fmt.Sprintf("(4,%d,%d,'2020-01-01 00:04:00',%d,'%s','%s')", p.topic, p.author, p.likes, strings.Join(p.subject, " "), strings.Join(p.body, " "))
	if !strings.HasPrefix(q, "INSERT INTO posts (id, topic, author, posted, likes, subject, body) VALUES (3,") || !strings.HasSuffix(q, "),"+want) {
		t.Errorf("INSERT:\n%s\nwant it to end with ,%s", q, want)
	}
}
