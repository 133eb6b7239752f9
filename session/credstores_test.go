package session

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/fsid"
	"golang.org/x/sys/unix"
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

// TestCrossUserCredScanChanges: an unprivileged caller's scans through
// the Runner's index cache, each as the caller, see what changed since
// the index held: a directory of hers made root's and unreadable to her
// (its store no longer found: the command cannot read it either), and a
// key written through a mapping whose page was written before the scans
// (no time changes). Each is compared with a scan without an index.
func TestCrossUserCredScanChanges(t *testing.T) {
	x := newCrossUser(t)
	t.Parallel()
	private := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
	app, key := filepath.Join(x.alice, ".config", "app"), filepath.Join(x.alice, ".ssh", "id_work")
	state := filepath.Join(x.base, "alice-state")
	for _, d := range []string{filepath.Dir(app), app, filepath.Dir(key), state} {
		if err := os.Mkdir(d, 0o755); err != nil || os.Chown(d, aliceID, aliceID) != nil {
			t.Fatal(d, err)
		}
	}
	for p, s := range map[string]string{filepath.Join(app, "token"): "t", key: strings.Repeat("n", len(private))} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil || os.Chown(p, aliceID, aliceID) != nil {
			t.Fatal(p, err)
		}
	}
	f, err := os.OpenFile(key, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, len(private), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	m[0] = 'N'
	r := New(Config{})
	alice := fsid.ID{UID: aliceID, GID: aliceID, Groups: []int{aliceID}, Umask: 0o022}
	cfg := credstore.ScanConfig{Home: x.alice, StateDirs: []string{filepath.Dir(app)}, Index: filepath.Join(state, "credstores.index"),
		Cache: r.indexes, UID: aliceID, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	scan := func(cfg credstore.ScanConfig) []string {
		t.Helper()
		var res credstore.Result
		if aerr := fsid.Do(alice, func() error { res, err = credstore.Scan(context.Background(), cfg); return nil }); aerr != nil || err != nil {
			t.Fatal(aerr, err)
		}
		var out []string
		for _, f := range res.Found {
			out = append(out, strings.TrimPrefix(f.Path, x.alice))
		}
		return out
	}
	scan(cfg)
	if got := scan(cfg); !slices.Equal(got, []string{"/.config/app/token"}) {
		t.Fatalf("before the changes: found %q", got)
	}
	oracle := cfg
	oracle.Index, oracle.Cache = "", nil
	for _, change := range []func() error{
		func() error { return os.Chown(app, 0, 0) },
		func() error { return os.Chmod(app, 0o700) },
		func() error { copy(m, private); return nil },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if got, want := scan(cfg), scan(oracle); !slices.Equal(got, want) {
			t.Fatalf("found %q, a scan without the index finds %q", got, want)
		}
	}
	if got := scan(cfg); !slices.Equal(got, []string{"/.ssh/id_work"}) {
		t.Fatalf("after the changes: found %q, want her key only", got)
	}
}

// TestCrossUserCredScanGroupGained: a directory of the caller's home
// that she could not list at one scan and can at the next, because she
// is now in its group (no change to the directory, so none to its change
// time), is read at the next: its store is found, as a scan without the
// index finds it. (Her groups are the daemon's word on her, not in the
// index's key.)
func TestCrossUserCredScanGroupGained(t *testing.T) {
	x := newCrossUser(t)
	t.Parallel()
	const team = 4242 // no group of hers
	app, state := filepath.Join(x.alice, ".config", "app"), filepath.Join(x.base, "alice-state")
	for _, d := range []string{filepath.Dir(app), app, state} {
		if err := os.Mkdir(d, 0o755); err != nil || os.Chown(d, aliceID, aliceID) != nil {
			t.Fatal(d, err)
		}
	}
	if err := os.WriteFile(filepath.Join(app, "token"), []byte("t"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(app, 0, team); err != nil || os.Chmod(app, 0o750) != nil {
		t.Fatal(err)
	}
	r := New(Config{})
	cfg := credstore.ScanConfig{Home: x.alice, StateDirs: []string{filepath.Dir(app)}, Index: filepath.Join(state, "credstores.index"),
		Cache: r.indexes, UID: aliceID, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	oracle := cfg
	oracle.Index, oracle.Cache = "", nil
	scan := func(cfg credstore.ScanConfig, groups ...int) []string {
		t.Helper()
		var res credstore.Result
		var err error
		who := fsid.ID{UID: aliceID, GID: aliceID, Groups: append([]int{aliceID}, groups...), Umask: 0o022}
		if aerr := fsid.Do(who, func() error { res, err = credstore.Scan(context.Background(), cfg); return nil }); aerr != nil || err != nil {
			t.Fatal(aerr, err)
		}
		var out []string
		for _, f := range res.Found {
			out = append(out, strings.TrimPrefix(f.Path, x.alice))
		}
		return out
	}
	if got := scan(cfg); len(got) != 0 {
		t.Fatalf("outside the group: found %q", got)
	}
	// Read again, still not listable: the index is not written anew.
	before, err := os.Stat(cfg.Index)
	if err != nil {
		t.Fatal(err)
	}
	if got := scan(cfg); len(got) != 0 {
		t.Fatalf("outside the group, again: found %q", got)
	}
	if after, err := os.Stat(cfg.Index); err != nil || !os.SameFile(before, after) {
		t.Errorf("a scan that found the directory still not listable wrote the index anew (%v)", err)
	}
	got, want := scan(cfg, team), scan(oracle, team)
	if !slices.Equal(want, []string{"/.config/app/token"}) {
		t.Fatalf("in the group, a scan without the index found %q", want)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("in the group: found %q, a scan without the index finds %q", got, want)
	}
}
