package credstore

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The name class and the rules' text an IndexCache makes once are the
// package's own, the same for every scan.
func TestCachedPatterns(t *testing.T) {
	c := NewIndexCache()
	for i := 0; i < 2; i++ {
		pats, rules := c.patterns()
		if !reflect.DeepEqual(pats, namePatterns()) || rules != rulesText(namePatterns()) {
			t.Fatalf("call %d: the cache's name class or rules differ from the package's", i)
		}
	}
}

// An index key an IndexCache keeps is the key of a configuration equal
// in every field: any field changed, in place in the caller's slices
// too, makes the key anew; more configurations than the cache keeps
// still each get their own.
func TestCachedKeyFollowsConfig(t *testing.T) {
	base := func() ScanConfig {
		return ScanConfig{Home: "/home/u", StateDirs: []string{"/home/u/.config", "/home/u/.cache"},
			CacheDirs: []string{"/home/u/.cache"}, Covered: []string{"/home/u/.netrc", "/home/u/.ssh"}, Skip: []string{"/x"}}
	}
	uncached := func(cfg ScanConfig) string {
		cfg.Cache = nil
		return (&scanner{cfg: cfg}).indexKey()
	}
	cached := func(c *IndexCache, cfg ScanConfig) string {
		cfg.Cache = c
		s := &scanner{cfg: cfg}
		s.pats, s.rules = c.patterns()
		return c.key(&s.cfg, s.indexKey)
	}
	changes := []func(*ScanConfig){
		func(*ScanConfig) {},
		func(c *ScanConfig) { c.Home = "/home/v" },
		func(c *ScanConfig) { c.StateDirs = c.StateDirs[:1] },
		func(c *ScanConfig) { c.StateDirs[1] = "/elsewhere" },
		func(c *ScanConfig) { c.CacheDirs = nil },
		func(c *ScanConfig) { c.Covered = append(c.Covered, "/home/u/.pgpass") },
		func(c *ScanConfig) { c.Covered[0] = "/home/u/.netrc2" },
		func(c *ScanConfig) { c.Covered = nil },
		func(c *ScanConfig) { c.Skip = []string{"/y"} },
		func(c *ScanConfig) { c.Skip = nil },
	}
	c := NewIndexCache()
	seen := map[string]int{}
	for round := 0; round < 2; round++ {
		for i, change := range changes {
			cfg := base()
			change(&cfg)
			want := uncached(cfg)
			if got := cached(c, cfg); got != want {
				t.Fatalf("round %d, change %d: cached key %s, want %s", round, i, got, want)
			}
			if j, ok := seen[want]; ok && j != i {
				t.Fatalf("changes %d and %d made the same key", j, i)
			}
			seen[want] = i
		}
	}
	// A caller that changes its slices in place after a scan.
	cfg := base()
	first := cached(c, cfg)
	cfg.Covered[1] = "/home/u/.gnupg"
	if got := cached(c, cfg); got == first || got != uncached(cfg) {
		t.Fatal("a configuration changed in place got the key it had before")
	}
	// More configurations than the cache keeps.
	for i := 0; i < 3*maxCachedKeys; i++ {
		cfg := base()
		cfg.Home = "/home/u" + strings.Repeat("x", i%(maxCachedKeys+3))
		if got := cached(c, cfg); got != uncached(cfg) {
			t.Fatalf("configuration %d: the cached key is another's", i)
		}
	}
	if len(c.keys) > maxCachedKeys {
		t.Fatalf("the cache keeps %d keys, more than %d", len(c.keys), maxCachedKeys)
	}
}

// childPath is filepath.Join for a clean absolute directory, whatever
// the name (one read from an index is the caller's file's).
func FuzzChildPath(f *testing.F) {
	for _, s := range [][2]string{{"/", "a"}, {"/home/u", "x"}, {"/home/u", ".."}, {"/home/u", "."}, {"/home/u", ""},
		{"/home/u", "a/../../b"}, {"/", ".."}, {"/a", "/b/"}, {"/a", "b//c"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, dir, name string) {
		dir = filepath.Clean("/" + dir)
		if got, want := childPath(dir, name), filepath.Join(dir, name); got != want {
			t.Fatalf("childPath(%q, %q) = %q, want %q", dir, name, got, want)
		}
	})
}

// scanChange is a change made to a scanned home between two scans.
type scanChange struct {
	name string
	// setup runs before the first scans, do between them.
	setup, do func(t *testing.T, h, outside string)
}

// sameSecondChanges are changes the next scan must see though they come
// within the same second as the scan before: each is compared with a
// scan without an index (the oracle: every directory read).
func sameSecondChanges(private []byte) []scanChange {
	write := func(t *testing.T, p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	notKey := strings.Repeat("not a key\n", len(private)/10+1)
	var mapped []byte
	return []scanChange{
		{"a store created", nil, func(t *testing.T, h, _ string) { write(t, filepath.Join(h, ".config/app/token"), "t") }},
		{"a store renamed in", func(t *testing.T, _, o string) { write(t, filepath.Join(o, "auth.json"), "{}") },
			func(t *testing.T, h, o string) {
				if err := os.Rename(filepath.Join(o, "auth.json"), filepath.Join(h, ".config/app/auth.json")); err != nil {
					t.Fatal(err)
				}
			}},
		{"a directory replaced by a link", func(t *testing.T, _, o string) { write(t, filepath.Join(o, "linked/token"), "t") },
			func(t *testing.T, h, o string) {
				if err := os.RemoveAll(filepath.Join(h, ".config/app")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(o, "linked"), filepath.Join(h, ".config/app")); err != nil {
					t.Fatal(err)
				}
			}},
		{"a key written in place", func(t *testing.T, h, _ string) { write(t, filepath.Join(h, ".ssh/id_work"), notKey) },
			func(t *testing.T, h, _ string) {
				f, err := os.OpenFile(filepath.Join(h, ".ssh/id_work"), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt(private, 0); err != nil {
					t.Fatal(err)
				}
			}},
		{"a key written through a shared mapping", func(t *testing.T, h, _ string) { write(t, filepath.Join(h, ".ssh/id_work"), notKey) },
			func(t *testing.T, h, _ string) {
				copy(mapShared(t, filepath.Join(h, ".ssh/id_work"), len(private)), private)
			}},
		// A page written through a mapping before the scans stays
		// writable: the key written after them changes no time at all.
		{"a key written through a mapping already written", func(t *testing.T, h, _ string) {
			write(t, filepath.Join(h, ".ssh/id_work"), notKey)
			mapped = mapShared(t, filepath.Join(h, ".ssh/id_work"), len(private))
			mapped[0] = 'N'
		}, func(t *testing.T, h, _ string) { copy(mapped, private) }},
		{"a directory made unreadable", func(t *testing.T, h, _ string) { write(t, filepath.Join(h, ".config/app/token"), "t") },
			func(t *testing.T, h, _ string) {
				if err := os.Chmod(filepath.Join(h, ".config/app"), 0); err != nil {
					t.Fatal(err)
				}
			}},
	}
}

// mapShared maps the first n bytes of the file p shared and writable,
// until the test ends.
func mapShared(t *testing.T, p string, n int) []byte {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// TestScanSeesSameSecondChanges: scans through an IndexCache with an
// index that holds (every directory settled, by the scan's clock) see
// each change made since, within the same second: what they find is
// what a scan that reads every directory finds. On tmpfs too, where a
// write through a shared mapping changes no time.
func TestScanSeesSameSecondChanges(t *testing.T) {
	private, _ := keyPEMs(t)
	bases := map[string]string{"disk": t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "credstore-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			bases["tmpfs"] = shm
		}
	}
	for fsName, base := range bases {
		for i, ch := range sameSecondChanges(private["pkcs8 pem"]) {
			t.Run(fsName+"/"+ch.name, func(t *testing.T) {
				dir := filepath.Join(base, strconvItoa(i))
				h, outside := filepath.Join(dir, "home"), filepath.Join(dir, "outside")
				for _, d := range []string{h + "/.config/app", h + "/.ssh", outside} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				t.Cleanup(func() { os.Chmod(filepath.Join(h, ".config/app"), 0o755) })
				if ch.setup != nil {
					ch.setup(t, h, outside)
				}
				checkSameSecond(t, h, filepath.Join(dir, "index"), func() { ch.do(t, h, outside) })
			})
		}
	}
}

// checkSameSecond scans h twice through a cache (the second from the
// index), makes the change, and scans again: what it finds must be what
// a scan without an index finds.
func checkSameSecond(t *testing.T, h, idx string, change func()) {
	t.Helper()
	c := NewIndexCache()
	cfg := scanCfg(h, idx)
	cfg.Cache, cfg.UID = c, os.Getuid()
	scan := func(cfg ScanConfig) Result {
		t.Helper()
		r, err := Scan(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	scan(cfg)
	if r := scan(cfg); r.Read != 0 {
		t.Fatalf("the index did not hold: %d directories read", r.Read)
	}
	start := time.Now()
	change()
	got := foundPaths(h, scan(cfg))
	oracle := cfg
	oracle.Index, oracle.Cache = "", nil
	want := foundPaths(h, scan(oracle))
	if !slices.Equal(got, want) {
		t.Fatalf("after the change: found %q, a full scan finds %q", got, want)
	}
	if time.Since(start) > time.Second {
		t.Logf("the change and the scans took %v", time.Since(start))
	}
}

// TestScanRandomChanges: random homes changed at random between scans
// through an IndexCache (the clock saying every directory settled, so
// the index holds wherever times allow): each scan finds what a scan
// without an index finds.
func TestScanRandomChanges(t *testing.T) {
	private, _ := keyPEMs(t)
	key := private["pkcs8 pem"]
	dirs := []string{"", ".config", ".config/app", ".ssh", "Documents", "Documents/old", ".local/share/x", "src/p", ".cache/t"}
	names := []string{"token", ".netrc", "id_x", "notes.txt", "auth.json", "server.key", "a.pem", ".git", "HEAD", "passwords.txt"}
	rng := rand.New(rand.NewPCG(24, 33))
	for round := 0; round < 8; round++ {
		base := t.TempDir()
		h := filepath.Join(base, "home")
		cfg := scanCfg(h, filepath.Join(base, "index"))
		cfg.Cache, cfg.UID = NewIndexCache(), os.Getuid()
		oracle := cfg
		oracle.Index, oracle.Cache = "", nil
		var maps [][]byte
		for step := 0; step < 25; step++ {
			randomChange(t, rng, h, dirs, names, key, &maps)
			got, err := Scan(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Scan(context.Background(), oracle)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(foundPaths(h, got), foundPaths(h, want)) {
				t.Fatalf("round %d, step %d: found %q, a scan without the index finds %q", round, step, foundPaths(h, got), foundPaths(h, want))
			}
		}
	}
}

// randomChange makes one random change below h: a file written or
// removed, a directory made, removed, renamed or linked, a key written
// in place or through a mapping kept open (maps).
func randomChange(t *testing.T, rng *rand.Rand, h string, dirs, names []string, key []byte, maps *[][]byte) {
	t.Helper()
	d := filepath.Join(h, dirs[rng.IntN(len(dirs))])
	p := filepath.Join(d, names[rng.IntN(len(names))])
	os.MkdirAll(d, 0o755)
	switch rng.IntN(7) {
	case 0, 1:
		body := strings.Repeat("n", len(key))
		if rng.IntN(3) == 0 {
			body = string(key)
		}
		os.RemoveAll(p)
		os.WriteFile(p, []byte(body), 0o600)
	case 2:
		os.RemoveAll(p)
	case 3:
		os.RemoveAll(p)
		os.MkdirAll(p, 0o755)
	case 4:
		os.Rename(d, filepath.Join(h, dirs[rng.IntN(len(dirs))]+"-moved"))
	case 5:
		os.RemoveAll(p)
		os.Symlink(filepath.Join(h, dirs[rng.IntN(len(dirs))]), p)
	case 6:
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() && st.Size() >= int64(len(key)) {
			if len(*maps) > 0 && rng.IntN(2) == 0 {
				copy((*maps)[rng.IntN(len(*maps))], key)
			} else {
				m := mapShared(t, p, len(key))
				m[0] = 'N'
				*maps = append(*maps, m)
			}
		}
	}
}
