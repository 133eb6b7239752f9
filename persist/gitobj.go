package persist

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Reading git's objects the way git finds them: loose objects, pack files
// (version 2 index, deltas by offset and by name) and the object
// directories objects/info/alternates adds, recursively. Only what the
// history check needs: the type and body of commits, tags and trees. Input
// is untrusted: every size is bounded, and anything odd is an error, which
// callers treat as "cannot be checked".

// Opener is an FS that can open a regular file for random access (pack
// files are read in place, not whole).
type Opener interface {
	Open(path string) (OpenFile, error)
}

// OpenFile is an open regular file.
type OpenFile interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

const (
	maxObject      = 64 << 20 // the largest commit, tag or tree read
	maxDeltaDepth  = 64
	maxAlternates  = 5 // levels of alternates followed, as git
	maxPackObjects = 1 << 26
)

// store reads the objects of one repository.
type store struct {
	fs     FS
	dirs   []string // object directories: the repository's own, then alternates
	packs  []*pack
	loaded bool
	rawLen int // 20 (SHA-1) or 32 (SHA-256)
}

type pack struct {
	path  string // the .pack file
	names []byte // sorted object names, rawLen each
	offs  []uint64
	// cache holds objects already read from the pack by offset (delta
	// bases are read again and again), up to cacheBytes in all.
	cache      map[uint64]cached
	cacheBytes int
}

type cached struct {
	typ  string
	body []byte
}

// maxCache bounds one pack's cache.
const maxCache = 128 << 20

func newStore(fsys FS, objects string, rawLen int) *store {
	s := &store{fs: fsys, rawLen: rawLen}
	s.addDir(objects, 0)
	return s
}

func (s *store) addDir(dir string, depth int) {
	for _, d := range s.dirs {
		if d == dir {
			return
		}
	}
	s.dirs = append(s.dirs, dir)
	if depth >= maxAlternates {
		return
	}
	b, err := readFollow(s.fs, dir+"/info/alternates", 1<<20)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if !strings.HasPrefix(line, "/") {
			line = dir + "/" + line
		}
		if r, err := Resolve(s.fs, line, true); err == nil {
			s.addDir(r, depth+1)
		}
	}
}

// loadPacks reads every pack index of every object directory.
func (s *store) loadPacks() error {
	if s.loaded {
		return nil
	}
	s.loaded = true
	l, ok := s.fs.(lister)
	if !ok {
		return errors.New("cannot list pack directories")
	}
	for _, d := range s.dirs {
		names, err := l.ReadDir(d + "/pack")
		if err != nil {
			continue
		}
		sort.Strings(names)
		for _, n := range names {
			if !strings.HasSuffix(n, ".idx") {
				continue
			}
			p, err := s.readIdx(d+"/pack/"+n, d+"/pack/"+strings.TrimSuffix(n, ".idx")+".pack")
			if err != nil {
				return fmt.Errorf("pack index %s: %w", n, err)
			}
			s.packs = append(s.packs, p)
		}
	}
	return nil
}

// readIdx reads a version 2 pack index.
func (s *store) readIdx(idx, packPath string) (*pack, error) {
	b, err := readFollow(s.fs, idx, 1<<31)
	if err != nil {
		return nil, err
	}
	if len(b) < 8+256*4 || !bytes.Equal(b[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(b[4:8]) != 2 {
		return nil, errors.New("not a version 2 pack index")
	}
	n := int(binary.BigEndian.Uint32(b[8+255*4:]))
	if n > maxPackObjects {
		return nil, errors.New("too many objects")
	}
	off := 8 + 256*4
	need := off + n*s.rawLen + n*4 + n*4
	if len(b) < need {
		return nil, errors.New("cut short")
	}
	p := &pack{path: packPath, names: b[off : off+n*s.rawLen], offs: make([]uint64, n)}
	o32 := off + n*s.rawLen + n*4
	o64 := o32 + n*4
	for i := 0; i < n; i++ {
		v := uint64(binary.BigEndian.Uint32(b[o32+4*i:]))
		if v&0x80000000 != 0 {
			k := int(v &^ 0x80000000)
			if len(b) < o64+8*(k+1) {
				return nil, errors.New("bad large offset")
			}
			v = binary.BigEndian.Uint64(b[o64+8*k:])
		}
		p.offs[i] = v
	}
	return p, nil
}

// find returns the offset of the object name raw in p.
func (p *pack) find(raw []byte, rawLen int) (uint64, bool) {
	n := len(p.offs)
	i := sort.Search(n, func(i int) bool { return bytes.Compare(p.names[i*rawLen:(i+1)*rawLen], raw) >= 0 })
	if i < n && bytes.Equal(p.names[i*rawLen:(i+1)*rawLen], raw) {
		return p.offs[i], true
	}
	return 0, false
}

// emptyTree is the name of the empty tree for a hash whose raw names
// are rawLen bytes: the one object git never needs to store.
func emptyTree(rawLen int) string {
	switch rawLen {
	case 20:
		return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	case 32:
		return "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
	}
	return ""
}

// read returns an object's type and body.
func (s *store) read(id string) (string, []byte, error) { return s.readAt(id, 0) }

// readAt is read at a depth of deltas (a delta's base named by its id may
// be a delta too, or, in a crafted pack, itself).
func (s *store) readAt(id string, depth int) (string, []byte, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != s.rawLen {
		return "", nil, fmt.Errorf("bad object name %q", id)
	}
	if id == emptyTree(s.rawLen) {
		// git knows the empty tree without storing it (object-file.c,
		// find_cached_object), and looks there first: `git rebase
		// --root` and `git commit-tree` of an empty index name it.
		return "tree", nil, nil
	}
	for _, d := range s.dirs {
		p := d + "/" + id[:2] + "/" + id[2:]
		if _, err := s.fs.Lstat(p); err == nil {
			return s.readLoose(p)
		}
	}
	if err := s.loadPacks(); err != nil {
		return "", nil, err
	}
	for _, pk := range s.packs {
		if off, ok := pk.find(raw, s.rawLen); ok {
			return s.readPacked(pk, off, depth)
		}
	}
	return "", nil, fmt.Errorf("object %s not found", id)
}

func (s *store) readLoose(p string) (string, []byte, error) {
	b, err := readFollow(s.fs, p, maxObject+1<<10)
	if err != nil {
		return "", nil, err
	}
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", nil, inflateError(err)
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, maxObject+64))
	if err != nil {
		return "", nil, inflateError(err)
	}
	head, rest, ok := bytes.Cut(data, []byte{0})
	if !ok {
		return "", nil, errors.New("bad loose object")
	}
	t, size, _ := strings.Cut(string(head), " ")
	if n, err := strconv.Atoi(size); err != nil || n != len(rest) {
		return "", nil, errors.New("bad loose object size")
	}
	return t, rest, nil
}

func (s *store) readPacked(pk *pack, off uint64, depth int) (string, []byte, error) {
	o, ok := s.fs.(Opener)
	if !ok {
		return "", nil, errors.New("cannot open pack files")
	}
	f, err := o.Open(pk.path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	return s.packEntry(f, pk, off, depth)
}

func packType(t byte) string {
	switch t {
	case 1:
		return "commit"
	case 2:
		return "tree"
	case 3:
		return "blob"
	}
	return "tag"
}

// packEntry reads the object at off, applying deltas.
func (s *store) packEntry(f OpenFile, pk *pack, off uint64, depth int) (string, []byte, error) {
	if depth > maxDeltaDepth {
		return "", nil, errors.New("delta chain too deep")
	}
	if c, ok := pk.cache[off]; ok {
		return c.typ, c.body, nil
	}
	typ, body, err := s.packEntryUncached(f, pk, off, depth)
	if err == nil && pk.cacheBytes+len(body) <= maxCache {
		if pk.cache == nil {
			pk.cache = map[uint64]cached{}
		}
		pk.cache[off] = cached{typ, body}
		pk.cacheBytes += len(body)
	}
	return typ, body, err
}

func (s *store) packEntryUncached(f OpenFile, pk *pack, off uint64, depth int) (string, []byte, error) {
	if off < 12 || int64(off) >= f.Size() {
		return "", nil, errors.New("bad pack offset")
	}
	var hdr [32]byte
	n, _ := f.ReadAt(hdr[:], int64(off))
	if n == 0 {
		return "", nil, errors.New("bad pack entry")
	}
	c := hdr[0]
	typ := (c >> 4) & 7
	size := uint64(c & 15)
	shift, i := 4, 1
	for c&0x80 != 0 {
		if i >= n || shift > 60 {
			return "", nil, errors.New("bad pack entry size")
		}
		c = hdr[i]
		i++
		size |= uint64(c&0x7f) << shift
		shift += 7
	}
	if size > maxObject {
		return "", nil, errors.New("object too large")
	}
	var base func() (string, []byte, error)
	switch typ {
	case 1, 2, 3, 4:
	case 6: // ofs-delta: base at a negative offset
		if i >= n {
			return "", nil, errors.New("bad delta")
		}
		c = hdr[i]
		i++
		rel := uint64(c & 0x7f)
		for c&0x80 != 0 {
			if i >= n || rel > 1<<56 {
				return "", nil, errors.New("bad delta offset")
			}
			c = hdr[i]
			i++
			rel = ((rel + 1) << 7) | uint64(c&0x7f)
		}
		if rel == 0 || rel > off {
			return "", nil, errors.New("bad delta offset")
		}
		base = func() (string, []byte, error) { return s.packEntry(f, pk, off-rel, depth+1) }
	case 7: // ref-delta: base by name
		if i+s.rawLen > n {
			return "", nil, errors.New("bad delta")
		}
		id := hex.EncodeToString(hdr[i : i+s.rawLen])
		i += s.rawLen
		base = func() (string, []byte, error) { return s.readAt(id, depth+1) }
	default:
		return "", nil, errors.New("unknown pack entry type")
	}
	zr, err := zlib.NewReader(io.NewSectionReader(f, int64(off)+int64(i), f.Size()-int64(off)-int64(i)))
	if err != nil {
		return "", nil, inflateError(err)
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, int64(size)+1))
	if err != nil {
		return "", nil, inflateError(err)
	}
	if uint64(len(data)) != size {
		return "", nil, errors.New("pack entry size mismatch")
	}
	if base == nil {
		return packType(typ), data, nil
	}
	bt, bd, err := base()
	if err != nil {
		return "", nil, err
	}
	out, err := applyDelta(bd, data)
	return bt, out, err
}

// applyDelta applies a git delta to base.
func applyDelta(base, delta []byte) ([]byte, error) {
	varint := func() (uint64, error) {
		var v uint64
		for shift := 0; ; shift += 7 {
			if len(delta) == 0 || shift > 56 {
				return 0, errors.New("bad delta header")
			}
			c := delta[0]
			delta = delta[1:]
			v |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, nil
			}
		}
	}
	srcSize, err := varint()
	if err != nil {
		return nil, err
	}
	dstSize, err := varint()
	if err != nil {
		return nil, err
	}
	if srcSize != uint64(len(base)) || dstSize > maxObject {
		return nil, errors.New("delta does not fit its base")
	}
	// Not preallocated from the header: a crafted one would make every
	// read allocate the bound.
	var out []byte
	for len(delta) > 0 {
		c := delta[0]
		delta = delta[1:]
		switch {
		case c&0x80 != 0:
			var off, size uint64
			for k := 0; k < 4; k++ {
				if c&(1<<k) != 0 {
					if len(delta) == 0 {
						return nil, errors.New("bad delta copy")
					}
					off |= uint64(delta[0]) << (8 * k)
					delta = delta[1:]
				}
			}
			for k := 0; k < 3; k++ {
				if c&(0x10<<k) != 0 {
					if len(delta) == 0 {
						return nil, errors.New("bad delta copy")
					}
					size |= uint64(delta[0]) << (8 * k)
					delta = delta[1:]
				}
			}
			if size == 0 {
				size = 0x10000
			}
			if off+size > uint64(len(base)) || uint64(len(out))+size > dstSize {
				return nil, errors.New("delta copy out of range")
			}
			out = append(out, base[off:off+size]...)
		case c != 0:
			if int(c) > len(delta) || uint64(len(out))+uint64(c) > dstSize {
				return nil, errors.New("delta insert out of range")
			}
			out = append(out, delta[:c]...)
			delta = delta[c:]
		default:
			return nil, errors.New("reserved delta instruction")
		}
	}
	if uint64(len(out)) != dstSize {
		return nil, errors.New("delta result size mismatch")
	}
	return out, nil
}

// treeEntry is one entry of a tree object.
type treeEntry struct {
	mode, id string
}

// parseTree reads a tree object's entries by name.
func parseTree(body []byte, rawLen int) (map[string]treeEntry, error) {
	out := map[string]treeEntry{}
	for len(body) > 0 {
		sp := bytes.IndexByte(body, ' ')
		nul := bytes.IndexByte(body, 0)
		if sp <= 0 || nul < sp || len(body) < nul+1+rawLen {
			return nil, errors.New("bad tree")
		}
		mode, name := string(body[:sp]), string(body[sp+1:nul])
		out[name] = treeEntry{mode: strings.TrimLeft(mode, "0"), id: hex.EncodeToString(body[nul+1 : nul+1+rawLen])}
		body = body[nul+1+rawLen:]
	}
	return out, nil
}
