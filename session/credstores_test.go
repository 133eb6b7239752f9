package session

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/broker"
)

// pathList.has answers as broker.Within against each path of the list
// (the loop foundStores made before): random paths and lists of plain
// paths, globs, unclean paths and the root.
func TestPathListAsWithin(t *testing.T) {
	parts := []string{"a", "b", ".c", "*", "x*", "?", "[ab]", "..", ".", "", "d.pem"}
	rng := rand.New(rand.NewPCG(33, 1))
	path := func() string {
		n := rng.IntN(5)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString("/" + parts[rng.IntN(len(parts))])
		}
		if b.Len() == 0 {
			return "/"
		}
		return b.String()
	}
	for i := 0; i < 20000; i++ {
		list := make([]string, rng.IntN(6))
		for j := range list {
			list[j] = path()
		}
		f := path()
		want := false
		for _, s := range list {
			if broker.Within(f, s) {
				want = true
				break
			}
		}
		if got := newPathList(list).has(f); got != want {
			t.Fatalf("has(%q) in %q = %v, broker.Within says %v", f, list, got, want)
		}
	}
}
