package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/landlock"
)

func TestCoveredBy(t *testing.T) {
	deny := []string{"/h/.ssh", "/h/.cache/go-build/sub/key", "/h/.cache/go-build/*.pem", "/h/.cache/g*", "/h/.cache/pip/[x"}
	if d, ok := coveredBy("/h/.ssh/x", deny); !ok || d != "/h/.ssh" {
		t.Errorf("coveredBy(/h/.ssh/x) = %q, %v", d, ok)
	}
	if d, ok := coveredBy("/h/.cache/go-build/y", deny); !ok || d != "/h/.cache/g*" {
		t.Errorf("coveredBy(go-build/y) = %q, %v", d, ok)
	}
	if _, ok := coveredBy("/h/.cache/pip", deny); ok {
		t.Errorf("coveredBy(pip) matched")
	}
}

// TestLowerRules checks which host caches may be lower layers and what
// is hidden inside them.
func TestLowerRules(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{".cache/go-build/sub", "real/cache", "go/pkg/mod/sub", "ws", ".ssh/cache", "store"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	os.Symlink(filepath.Join(home, "real/cache"), filepath.Join(home, "linked"))
	j := func(rel string) string { return filepath.Join(home, rel) }
	secrets := []string{j(".ssh"), j(".cache/go-build/sub/key"), j(".cache/go-build/*.pem"), j("real/cache/token"), j("store/secret-*")}
	base := lowerCheck{reads: landlock.NewCarveout(landlock.ResolveRoots([]string{"/"}), secrets, true), secrets: secrets,
		whole: []string{home, j(".cache")}, apart: []string{j("ws")}}
	strict := base
	strictDeny := append(append([]string(nil), secrets...), home)
	strict.reads = landlock.NewCarveout(landlock.ResolveRoots([]string{"/", j("go")}), strictDeny, false)
	// A deny entry below a host cache: hidden inside where carved
	// directories may be listed; where they may not (strict), the
	// command could not list the cache itself, so it is not shown.
	withSub := append(append([]string(nil), secrets...), j("go/pkg/mod/sub/key"))
	listed := base
	listed.reads = landlock.NewCarveout(landlock.ResolveRoots([]string{"/"}), withSub, true)
	strictSub := strict
	strictSub.reads = landlock.NewCarveout(landlock.ResolveRoots([]string{"/", j("go")}), append(withSub, home), false)
	cases := []struct {
		name  string
		rules lowerCheck
		p     string
		lower string // "" means refused
		why   string
		masks []string
	}{
		{name: "plain, secrets below are masked", rules: base, p: j(".cache/go-build"), lower: j(".cache/go-build"),
			masks: []string{"sub/key", "*.pem"}},
		{name: "symlinked, both spellings masked", rules: base, p: j("linked"), lower: j("real/cache"), masks: []string{"token"}},
		{name: "a secret itself", rules: base, p: j(".ssh"), why: "is a secret"},
		{name: "inside a secret", rules: base, p: j(".ssh/cache"), why: "is a secret"},
		{name: "matched by a glob secret", rules: base, p: j("store"), lower: j("store"), masks: []string{"secret-*"}},
		{name: "missing", rules: base, p: j("nope"), why: "no host cache"},
		{name: "all of the XDG cache", rules: base, p: j(".cache"), why: "holds"},
		{name: "the home", rules: base, p: home, why: "holds"},
		{name: "in the workspace", rules: base, p: j("ws"), why: "overlaps"},
		{name: "strict: allowed path", rules: strict, p: j("go/pkg/mod"), lower: j("go/pkg/mod")},
		{name: "strict: home denied", rules: strict, p: j(".cache/go-build"), why: "not readable"},
		{name: "a deny below, listed", rules: listed, p: j("go/pkg/mod"), lower: j("go/pkg/mod"), masks: []string{"sub/key"}},
		{name: "strict: a deny below, not listed", rules: strictSub, p: j("go/pkg/mod"), why: "not readable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lower, masks, why := tc.rules.host(tc.p)
			if lower != tc.lower || (tc.lower == "" && !strings.Contains(why, tc.why)) {
				t.Fatalf("host(%s) = %q, %q; want %q (%q)", tc.p, lower, why, tc.lower, tc.why)
			}
			for _, m := range tc.masks {
				if !slices.Contains(masks, m) {
					t.Errorf("masks %q lack %q", masks, m)
				}
			}
			if len(masks) != len(tc.masks) {
				t.Errorf("masks %q, want %q", masks, tc.masks)
			}
		})
	}
}

// TestLowerInside checks a resolved host cache against what the
// command's mount namespace shows.
func TestLowerInside(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{"full/x", "empty"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	j := func(rel string) string { return filepath.Join(home, rel) }
	base := lowerCheck{hidden: []string{"/run", "/tmp/x-hidden"}}
	root := base
	root.root, root.idHome = true, home
	unmapped := base
	unmapped.root = true
	hidden := base
	hidden.hidden = append(hidden.hidden, j("full"))
	for _, tc := range []struct {
		name  string
		rules lowerCheck
		p     string
		masks []string
		why   string // "" means shown
	}{
		{"shown", base, j("full"), []string{"a/b", "*.pem"}, ""},
		{"empty", base, j("empty"), nil, "is empty"},
		{"hidden inside", hidden, j("full"), nil, "is not visible inside"},
		{"root caller, inside the id-mapped home", root, j("full"), nil, ""},
		{"root caller, no id-mapped home", unmapped, j("full"), nil, "outside the id-mapped home"},
		{"a mask out of the cache", base, j("full"), []string{"../x"}, "cannot be hidden"},
	} {
		lower, _, why := tc.rules.inside(tc.p, tc.masks)
		if (tc.why == "") != (lower == tc.p) || !strings.Contains(why, tc.why) {
			t.Errorf("%s: inside(%s) = %q, %q; want why %q", tc.name, tc.p, lower, why, tc.why)
		}
	}
}
