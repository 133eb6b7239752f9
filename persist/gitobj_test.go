package persist

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// git runs git in dir for a test.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b", "LANG=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestStoreAgainstGit: every tree and commit the store reads, loose, packed
// with deltas, or behind alternates, is what git says it is.
func TestStoreAgainstGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "r")
	os.MkdirAll(repo, 0o755)
	git(t, repo, "init", "-q")
	// Many similar versions so that the repack makes deltas.
	for i := 0; i < 30; i++ {
		os.MkdirAll(filepath.Join(repo, "d", fmt.Sprint(i%3)), 0o755)
		os.WriteFile(filepath.Join(repo, "big.txt"), []byte(strings.Repeat("line\n", 200)+fmt.Sprint(i)), 0o644)
		os.WriteFile(filepath.Join(repo, "d", fmt.Sprint(i%3), "f"), []byte(fmt.Sprint(i)), 0o644)
		git(t, repo, "add", "-A")
		git(t, repo, "commit", "-q", "-m", fmt.Sprint("c", i))
	}
	git(t, repo, "repack", "-q", "-a", "-d", "-f", "--depth=20", "--window=50")
	// A loose commit on top, and a second repository borrowing the
	// objects through alternates.
	os.WriteFile(filepath.Join(repo, "loose.txt"), []byte("loose"), 0o644)
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "loose")
	other := filepath.Join(dir, "o")
	os.MkdirAll(other, 0o755)
	git(t, other, "init", "-q")
	os.WriteFile(filepath.Join(other, ".git/objects/info/alternates"), []byte(repo+"/.git/objects\n"), 0o644)

	s := newStore(Host{}, other+"/.git/objects", 20)
	ids := strings.Fields(git(t, repo, "rev-list", "--objects", "--all"))
	checked := 0
	for _, id := range ids {
		if len(id) != 40 {
			continue // a path after an object name
		}
		typ := strings.TrimSpace(git(t, repo, "cat-file", "-t", id))
		gotType, body, err := s.read(id)
		if err != nil {
			t.Fatalf("read %s (%s): %v", id, typ, err)
		}
		if gotType != typ {
			t.Fatalf("%s: type %s, git says %s", id, gotType, typ)
		}
		raw := git(t, repo, "cat-file", typ, id)
		if typ != "tree" && string(body) != raw {
			t.Fatalf("%s: body differs from git's", id)
		}
		if typ == "tree" {
			ents, err := parseTree(body, 20)
			if err != nil {
				t.Fatalf("tree %s: %v", id, err)
			}
			var got []string
			for name, e := range ents {
				got = append(got, e.id+" "+name)
			}
			var want []string
			for _, line := range strings.Split(strings.TrimSpace(git(t, repo, "ls-tree", id)), "\n") {
				f := strings.Fields(line)
				want = append(want, f[2]+" "+f[3])
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("tree %s\n got %q\nwant %q", id, got, want)
			}
		}
		checked++
	}
	if checked < 90 {
		t.Fatalf("only %d objects checked", checked)
	}
}

// TestParseIndexAgainstGit: index versions 2, 3 (extended flags) and 4
// (prefix-compressed paths) read as git lists them.
func TestParseIndexAgainstGit(t *testing.T) {
	for _, version := range []string{"2", "3", "4"} {
		dir := t.TempDir()
		git(t, dir, "init", "-q")
		for _, p := range []string{"a", "a.b/c", "a/b/c/d.txt", "a/b/e", "long/" + strings.Repeat("x", 100), "z"} {
			os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
			os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644)
		}
		os.Symlink("a", filepath.Join(dir, "link"))
		git(t, dir, "add", "-A")
		git(t, dir, "update-index", "--skip-worktree", "z") // an extended flag
		git(t, dir, "update-index", "--index-version", version)
		b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseIndex(b, 20)
		if err != nil {
			t.Fatalf("version %s: %v", version, err)
		}
		want := map[string]indexEntry{}
		for _, line := range strings.Split(strings.TrimSpace(git(t, dir, "ls-files", "-s")), "\n") {
			f := strings.Fields(line)
			want[strings.SplitN(line, "\t", 2)[1]] = indexEntry{f[0], f[1]}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("version %s\n got %v\nwant %v", version, got, want)
		}
	}
}

// The object and index readers take what the command wrote: they must
// never panic, and never return more than their bounds.
func FuzzGitObjects(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), []byte{0x05, 0x05, 0x90, 0x01, 0x02})
	f.Add([]byte("100644 a\x00aaaaaaaaaaaaaaaaaaaa40000 b\x00bbbbbbbbbbbbbbbbbbbb"), []byte{0x03, 0x04, 0x01, 'x', 0x91, 0x00, 0x03})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		parseTree(a, 20)
		parseIndex(a, 20)
		parseIndex(a, 32)
		if out, err := applyDelta(b, a); err == nil && len(out) > maxObject {
			t.Fatalf("delta result of %d bytes", len(out))
		}
		uvarint4(a)
		headers(a, "parent")
	})
}

// FuzzPack: pack indexes and packs the command wrote are read without
// panics or unbounded work, whatever they hold. Seeded with a real pack.
func FuzzPack(f *testing.F) {
	idx, pk := tinyPack()
	f.Add(idx, pk)
	f.Fuzz(func(t *testing.T, idx, pk []byte) {
		m := memFS{"/o/pack/p.idx": idx, "/o/pack/p.pack": pk}
		s := newStore(m, "/o", 20)
		if err := s.loadPacks(); err != nil || len(s.packs) == 0 {
			return
		}
		p := s.packs[0]
		for i := 0; i < len(p.offs) && i < 64; i++ {
			s.read(fmt.Sprintf("%x", p.names[i*20:(i+1)*20]))
		}
	})
}

// memFS is a flat in-memory tree of regular files (directories are
// implied), for fuzzing the readers without a disk.
type memFS map[string][]byte

func (m memFS) Lstat(p string) (Info, error) {
	if b, ok := m[p]; ok {
		return Info{Mode: 0o100644, Size: int64(len(b))}, nil
	}
	for k := range m {
		if strings.HasPrefix(k, p+"/") {
			return Info{Mode: 0o040755}, nil
		}
	}
	return Info{}, os.ErrNotExist
}
func (m memFS) Readlink(string) (string, error) { return "", os.ErrInvalid }
func (m memFS) ReadFile(p string, limit int) ([]byte, error) {
	b, ok := m[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return b[:min(len(b), limit)], nil
}
func (m memFS) Searchable(string, Info) bool { return true }
func (m memFS) ReadDir(p string) ([]string, error) {
	var out []string
	for k := range m {
		if rest, ok := strings.CutPrefix(k, p+"/"); ok && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	return out, nil
}
func (m memFS) Open(p string) (OpenFile, error) {
	b, ok := m[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return memFile{bytes.NewReader(b)}, nil
}

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// tinyPack builds a pack and its index holding one blob, one tree and a
// delta of the blob (a seed; the fuzzer's own mutations do the rest).
func tinyPack() (idx, pk []byte) {
	type obj struct {
		typ  byte
		body []byte
		base int // for a delta (ofs-delta), the index of its base; -1 for none
		name []byte
	}
	blob := []byte(strings.Repeat("hello\n", 20))
	name := func(typ string, body []byte) []byte {
		h := sha1.New()
		fmt.Fprintf(h, "%s %d\x00", typ, len(body))
		h.Write(body)
		return h.Sum(nil)
	}
	blob2 := append(append([]byte(nil), blob...), "bye\n"...)
	// delta: src size, dst size, copy all of base, insert "bye\n".
	delta := []byte{byte(len(blob)), byte(len(blob2)), 0x90, byte(len(blob)), 4, 'b', 'y', 'e', '\n'}
	tree := append([]byte("100644 a\x00"), name("blob", blob)...)
	objs := []obj{{3, blob, -1, name("blob", blob)}, {2, tree, -1, name("tree", tree)}, {6, delta, 0, name("blob", blob2)}}
	var buf bytes.Buffer
	buf.WriteString("PACK")
	binary.Write(&buf, binary.BigEndian, uint32(2))
	binary.Write(&buf, binary.BigEndian, uint32(len(objs)))
	offs := make([]uint32, len(objs))
	for i, o := range objs {
		offs[i] = uint32(buf.Len())
		size := len(o.body)
		c := o.typ<<4 | byte(size&15)
		size >>= 4
		for size > 0 {
			buf.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
			size >>= 7
		}
		buf.WriteByte(c)
		if o.base >= 0 {
			buf.WriteByte(byte(offs[i] - offs[o.base])) // small enough for one byte
		}
		zw := zlib.NewWriter(&buf)
		zw.Write(o.body)
		zw.Close()
	}
	pk = buf.Bytes()
	// Index: sorted by name.
	order := []int{0, 1, 2}
	sort.Slice(order, func(a, b int) bool { return bytes.Compare(objs[order[a]].name, objs[order[b]].name) < 0 })
	var ix bytes.Buffer
	ix.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	var fan [256]uint32
	for _, o := range objs {
		for k := int(o.name[0]); k < 256; k++ {
			fan[k]++
		}
	}
	binary.Write(&ix, binary.BigEndian, fan)
	for _, i := range order {
		ix.Write(objs[i].name)
	}
	for range order {
		binary.Write(&ix, binary.BigEndian, uint32(0)) // crc, not checked
	}
	for _, i := range order {
		binary.Write(&ix, binary.BigEndian, offs[i])
	}
	return ix.Bytes(), pk
}

// TestStoreEmptyTree: the empty tree reads as git reads it, stored or
// not, for both hashes (git never writes it: `git rebase --root` names
// it all the same).
func TestStoreEmptyTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	for _, c := range []struct {
		format string
		rawLen int
	}{{"sha1", 20}, {"sha256", 32}} {
		repo := filepath.Join(t.TempDir(), "r")
		os.MkdirAll(repo, 0o755)
		git(t, repo, "init", "-q", "--object-format="+c.format)
		id := emptyTree(c.rawLen)
		if got := strings.TrimSpace(git(t, repo, "cat-file", "-t", id)); got != "tree" {
			t.Fatalf("%s: git says %s is a %q", c.format, id, got)
		}
		s := newStore(Host{}, repo+"/.git/objects", c.rawLen)
		typ, body, err := s.read(id)
		if err != nil || typ != "tree" || len(body) != 0 {
			t.Errorf("%s: read(%s) = %q %q %v, want an empty tree", c.format, id, typ, body, err)
		}
		// Any other absent object is still absent.
		other := strings.Repeat("1", len(id))
		if _, _, err := s.read(other); err == nil {
			t.Errorf("%s: an absent object %s was read", c.format, other)
		}
	}
}
