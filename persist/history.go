package persist

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
)

// Git's history is a second copy of the work tree: a commit, the index, a
// stash or a branch the command wrote can carry a hook, an .envrc or a
// .vscode task that the work tree check refused, and the user's next
// `git checkout .`, `git stash pop`, `git reset --hard` or branch switch
// writes it. So in a layer, when a repository's refs, index or reflogs
// change, every tree and index entry the attempt created is checked: at a
// path where the work tree rules refuse a change, it must hold what the
// work tree will hold (or content the repository already had). If not,
// or if it cannot be told (objects packed during the run, a split or
// sparse index, reftable), the repository's refs, index, reflogs and
// operation state are not committed: the new commits stay unreachable.

// Layered is an FS that can tell what the attempt itself wrote.
type Layered interface {
	FS
	// InLayer reports whether the entry at path comes from the attempt.
	InLayer(path string) bool
	// LayerNames lists the names the attempt wrote in the directory path.
	LayerNames(path string) ([]string, error)
}

// historyLimit bounds the objects one check reads.
const historyLimit = 200_000

// objectLimit bounds one commit or tree object.
const objectLimit = 64 << 20

// historyFile reports the files of a git directory that name commits or
// stage content for the work tree: refs, packed-refs, HEAD and the other
// *_HEAD files, reflogs, the index, operation state.
func historyFile(rest string) bool {
	first, _, _ := strings.Cut(rest, "/")
	switch {
	case rest == "index", rest == "packed-refs", rest == "HEAD", rest == "reftable" || first == "reftable":
		return true
	case first == "refs", first == "logs", sequencerDir(first):
		return true
	case !strings.Contains(rest, "/") && strings.HasSuffix(rest, "_HEAD"):
		return true
	}
	return false
}

// history decides the history a layer adds to the git directory gd
// (workspace-relative): "" when it carries nothing the work tree rules
// refuse. Memoized.
func (c *Checker) history(gd string) string {
	if why, ok := c.histories[gd]; ok {
		return why
	}
	why := ""
	if l, ok := c.cfg.Final.(Layered); ok {
		h := &historyCheck{c: c, fs: l, gd: c.abs(gd), seen: map[string]bool{}}
		why = h.run()
	}
	c.histories[gd] = why
	return why
}

type historyCheck struct {
	c      *Checker
	fs     Layered
	gd     string // the git directory, absolute
	common string
	tree   string // its work tree, absolute ("" when bare)
	hash   func() hash.Hash
	hexLen int
	seen   map[string]bool
	reads  int
}

func (h *historyCheck) run() string {
	common, v := CommonDir(h.fs, h.gd)
	if v != GitDir {
		common = h.gd
	}
	h.common = common
	h.hash, h.hexLen = sha1.New, 40
	if b, err := readFollow(h.fs, common+"/config", gitconfig.MaxSize); err == nil {
		if ents, err := gitconfig.Parse(b); err == nil {
			for _, e := range ents {
				if e.Section == "extensions" && e.Key == "objectformat" && strings.EqualFold(e.Value, "sha256") {
					h.hash, h.hexLen = sha256.New, 64
				}
			}
		}
	}
	h.tree = h.workTree()
	if h.tree == "" {
		return "" // a bare repository: no checkout writes a work tree
	}
	if h.c.clone(h.gd) {
		// A repository the command cloned: what its history carries is
		// what its work tree may carry (listed, see exempt).
		return ""
	}
	if names, _ := h.fs.LayerNames(common + "/objects/pack"); len(names) > 0 {
		return "git packed objects during the run, which sandboxd cannot check"
	}
	if _, err := h.fs.Lstat(common + "/reftable"); err == nil {
		return "the repository keeps its refs in a reftable, which sandboxd cannot check"
	}
	var tips []string
	for _, dir := range []string{common + "/refs", common + "/logs", h.gd + "/logs"} {
		h.layerFiles(dir, func(p string) { tips = append(tips, h.shasIn(p)...) })
	}
	for _, f := range []string{common + "/packed-refs", h.gd + "/HEAD"} {
		if h.fs.InLayer(f) {
			tips = append(tips, h.shasIn(f)...)
		}
	}
	if names, err := h.fs.LayerNames(h.gd); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, "_HEAD") {
				tips = append(tips, h.shasIn(h.gd+"/"+n)...)
			}
		}
	}
	for _, sd := range []string{"rebase-merge", "rebase-apply", "sequencer"} {
		h.layerFiles(h.gd+"/"+sd, func(p string) { tips = append(tips, h.shasIn(p)...) })
	}
	for _, t := range tips {
		if why := h.commit(t); why != "" {
			return why
		}
	}
	if h.fs.InLayer(h.gd + "/index") {
		if why := h.index(h.gd + "/index"); why != "" {
			return why
		}
	}
	return ""
}

// workTree is where a checkout of gd writes.
func (h *historyCheck) workTree() string {
	ents := []gitconfig.Entry{}
	for _, f := range []string{h.common + "/config", h.gd + "/config.worktree"} {
		if b, err := readFollow(h.fs, f, gitconfig.MaxSize); err == nil {
			if e, err := gitconfig.Parse(b); err == nil {
				ents = append(ents, e...)
			}
		}
	}
	for _, e := range ents {
		if e.Section == "core" && e.Key == "bare" && strings.EqualFold(e.Value, "true") {
			return ""
		}
	}
	trees := worktrees(h.fs, h.gd, ents)
	for _, t := range trees[1:] { // not gd itself
		if t == h.c.cfg.Workspace || strings.HasPrefix(t, h.c.cfg.Workspace+"/") {
			return t
		}
	}
	return ""
}

// layerFiles calls f for every regular file the layer holds below dir.
func (h *historyCheck) layerFiles(dir string, f func(string)) {
	names, err := h.fs.LayerNames(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		p := dir + "/" + n
		st, err := h.fs.Lstat(p)
		switch {
		case err != nil:
		case st.IsDir():
			h.layerFiles(p, f)
		case h.fs.InLayer(p):
			f(p)
		}
	}
}

// shasIn finds every object name in a ref, reflog or state file.
func (h *historyCheck) shasIn(p string) []string {
	b, err := h.fs.ReadFile(p, objectLimit)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range strings.FieldsFunc(string(b), func(r rune) bool { return !isHex(r) }) {
		if len(f) == h.hexLen {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

func isHex(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'
}

// object reads an object the attempt wrote (loose, in the layer); ok is
// false for one the repository already had.
func (h *historyCheck) object(sha string) (typ string, body []byte, ok bool, err error) {
	if len(sha) != h.hexLen {
		return "", nil, false, nil
	}
	p := h.common + "/objects/" + sha[:2] + "/" + sha[2:]
	if !h.fs.InLayer(p) {
		return "", nil, false, nil
	}
	h.reads++
	if h.reads > historyLimit {
		return "", nil, true, errors.New("too many new objects to check")
	}
	raw, err := h.fs.ReadFile(p, objectLimit)
	if err != nil {
		return "", nil, true, err
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return "", nil, true, err
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, objectLimit+64))
	if err != nil {
		return "", nil, true, err
	}
	head, rest, found := bytes.Cut(data, []byte{0})
	if !found {
		return "", nil, true, errors.New("bad object header")
	}
	t, size, _ := strings.Cut(string(head), " ")
	if n, err := strconv.Atoi(size); err != nil || n != len(rest) {
		return "", nil, true, errors.New("bad object size")
	}
	return t, rest, true, nil
}

// commit walks a new commit, its new parents and their new trees.
func (h *historyCheck) commit(sha string) string {
	stack := []string{sha}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if h.seen[s] {
			continue
		}
		h.seen[s] = true
		typ, body, ok, err := h.object(s)
		if err != nil {
			return "cannot read the object " + s + " the command wrote: " + err.Error()
		}
		if !ok {
			continue
		}
		switch typ {
		case "commit", "tag":
			for _, line := range strings.Split(string(body), "\n") {
				if line == "" {
					break // the message follows
				}
				k, v, _ := strings.Cut(line, " ")
				switch k {
				case "tree":
					if why := h.treeWalk(v, ""); why != "" {
						return why
					}
				case "parent", "object":
					stack = append(stack, v)
				}
			}
		case "tree":
			if why := h.treeWalk(s, ""); why != "" {
				return why
			}
		}
	}
	return ""
}

// treeWalk checks a new tree's entries (at the work tree path prefix).
func (h *historyCheck) treeWalk(sha, prefix string) string {
	if h.seen["t"+sha] {
		return ""
	}
	h.seen["t"+sha] = true
	typ, body, ok, err := h.object(sha)
	if err != nil {
		return "cannot read the tree " + sha + " the command wrote: " + err.Error()
	}
	if !ok || typ != "tree" {
		return "" // the repository's own tree (or not a tree: git refuses it)
	}
	n := h.hexLen / 2
	for len(body) > 0 {
		sp := bytes.IndexByte(body, ' ')
		nul := bytes.IndexByte(body, 0)
		if sp < 0 || nul < sp || len(body) < nul+1+n {
			return "the tree " + sha + " the command wrote cannot be parsed"
		}
		mode, name, id := string(body[:sp]), string(body[sp+1:nul]), hex.EncodeToString(body[nul+1:nul+1+n])
		body = body[nul+1+n:]
		p := prefix + name
		switch mode {
		case "40000", "040000":
			if why := h.treeWalk(id, p+"/"); why != "" {
				return why
			}
		case "160000": // a submodule's commit: its own repository's rules
		default:
			if why := h.entry(p, mode, id); why != "" {
				return why
			}
		}
	}
	return ""
}

// entry checks that a tree or index entry at the work tree path p (mode,
// object id) carries nothing the work tree rules would refuse.
func (h *historyCheck) entry(p, mode, id string) string {
	if !validRelPath(p) {
		return "git history the command wrote names the path " + p + ", which git itself would refuse"
	}
	abs := h.tree + "/" + p
	rel := strings.TrimPrefix(strings.TrimPrefix(abs, h.c.cfg.Workspace), "/")
	v := h.c.Check(rel, File)
	if v.Action != Refuse {
		return ""
	}
	if len(id) == h.hexLen && !h.fs.InLayer(h.common+"/objects/"+id[:2]+"/"+id[2:]) {
		return "" // content the repository already had
	}
	// A change at p is refused, so what the work tree will hold there is
	// what it held before when the attempt changed it.
	view := FS(h.fs)
	if h.fs.InLayer(abs) {
		view = h.c.cfg.Before
	}
	if worktreeHolds(view, h.hash, abs, mode, id) {
		return ""
	}
	return "git history the command wrote puts other content at " + rel + " than the work tree will hold, and a checkout would write it there (" + v.Why + ")"
}

// worktreeHolds reports whether the work tree (in view) holds exactly the
// object id at p.
func worktreeHolds(view FS, newHash func() hash.Hash, p, mode, id string) bool {
	st, err := view.Lstat(p)
	if err != nil {
		return false
	}
	var content []byte
	switch {
	case mode == "120000" && st.IsSymlink():
		t, err := view.Readlink(p)
		if err != nil {
			return false
		}
		content = []byte(t)
	case (mode == "100644" || mode == "100755") && st.IsRegular():
		b, err := view.ReadFile(p, objectLimit+1)
		if err != nil || len(b) > objectLimit {
			return false
		}
		content = b
	default:
		return false
	}
	hh := newHash()
	fmt.Fprintf(hh, "blob %d\x00", len(content))
	hh.Write(content)
	return hex.EncodeToString(hh.Sum(nil)) == id
}

// validRelPath: what git accepts as a path in a tree (no "", ".", "..",
// no leading or doubled "/").
func validRelPath(p string) bool {
	if p == "" {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." || strings.EqualFold(e, ".git") {
			return false
		}
	}
	return true
}

// index checks the entries of an index file the attempt wrote (versions
// 2 to 4; git's Documentation/gitformat-index.txt).
func (h *historyCheck) index(p string) string {
	b, err := h.fs.ReadFile(p, 1<<30)
	if err != nil {
		return "cannot read the index the command wrote: " + err.Error()
	}
	bad := func(what string) string {
		return "the index the command wrote " + what + ", which sandboxd cannot check"
	}
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return bad("is not an index")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	count := binary.BigEndian.Uint32(b[8:12])
	if version < 2 || version > 4 {
		return bad("has an unknown version")
	}
	n := h.hexLen / 2
	off := 12
	prev := ""
	for i := uint32(0); i < count; i++ {
		fixed := 40 + n + 2
		if len(b) < off+fixed {
			return bad("is cut short")
		}
		start := off
		mode := binary.BigEndian.Uint32(b[off+24 : off+28])
		id := hex.EncodeToString(b[off+40 : off+40+n])
		flags := binary.BigEndian.Uint16(b[off+40+n : off+42+n])
		off += fixed
		if flags&0x4000 != 0 { // extended flags (skip-worktree, intent-to-add)
			if version < 3 || len(b) < off+2 {
				return bad("has bad flags")
			}
			off += 2
		}
		var name string
		if version == 4 {
			strip, k := uvarint4(b[off:])
			if k <= 0 || int(strip) > len(prev) {
				return bad("is cut short")
			}
			off += k
			nul := bytes.IndexByte(b[off:], 0)
			if nul < 0 {
				return bad("is cut short")
			}
			name = prev[:len(prev)-int(strip)] + string(b[off:off+nul])
			off += nul + 1
		} else {
			nul := bytes.IndexByte(b[off:], 0)
			if nul < 0 {
				return bad("is cut short")
			}
			name = string(b[off : off+nul])
			off += nul + 1
			// Padding to a multiple of eight bytes from the entry's start.
			for (off-start)%8 != 0 {
				off++
			}
		}
		prev = name
		m := ""
		switch mode & 0o170000 {
		case 0o100000:
			m = "100644"
			if mode&0o111 != 0 {
				m = "100755"
			}
		case 0o120000:
			m = "120000"
		case 0o160000:
			continue // a submodule
		case 0o040000:
			return bad("is a sparse index")
		}
		if why := h.entry(name, m, id); why != "" {
			return why
		}
	}
	// Extensions: a split index keeps entries elsewhere.
	for off+8 <= len(b)-n {
		sig := string(b[off : off+4])
		size := int(binary.BigEndian.Uint32(b[off+4 : off+8]))
		if sig == "link" {
			return bad("is a split index")
		}
		if size < 0 || off+8+size > len(b) {
			break
		}
		off += 8 + size
	}
	return ""
}

// uvarint4 is the index v4 path prefix length: git's offset encoding
// (varint.c decode_varint), not encoding/binary's.
func uvarint4(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	i := 0
	c := b[i]
	i++
	val := uint64(c & 127)
	for c&128 != 0 {
		if i >= len(b) {
			return 0, 0
		}
		val++
		if val == 0 || val&^(^uint64(0)>>7) != 0 {
			return 0, 0
		}
		c = b[i]
		i++
		val = (val << 7) + uint64(c&127)
	}
	return val, i
}

// historyRefusal is the work tree rules' verdict on a history file of gd.
func (c *Checker) historyRefusal(gd, rest string) (Verdict, bool) {
	if !historyFile(rest) {
		return Verdict{}, false
	}
	if rest == "HEAD" {
		// A symbolic HEAD ("ref: refs/heads/x") names no commit itself,
		// and without it the repository would not be one.
		if b, err := c.cfg.Final.ReadFile(c.abs(joinRel(gd, rest)), 256); err == nil && strings.HasPrefix(string(b), "ref:") {
			return Verdict{}, false
		}
	}
	if why := c.history(gd); why != "" {
		return Verdict{Refuse, why + "; the repository's refs, index and logs were not committed (the new commits stay unreachable)"}, true
	}
	return Verdict{}, false
}

// HistoryFile reports the files of a git directory (rest is relative to
// it) that name commits or stage content: see historyFile.
func HistoryFile(rest string) bool { return historyFile(rest) }

// History says why the history the attempt added to the git directory gd
// (workspace-relative) is refused, "" when it is not: see historyFile.
func (c *Checker) History(gd string) string { return c.history(gd) }

// NewerThan is the host's tree, where what changed at or after since (a
// change time in ns) counts as the attempt's own: for a run written
// straight to the workspace, whose every new file and object is stamped
// after it began (a change time cannot be set back).
func NewerThan(since int64) Layered { return newerFS{since: since} }

type newerFS struct {
	Host
	since int64
}

func (n newerFS) InLayer(p string) bool {
	st, err := n.Lstat(p)
	return err == nil && st.Ctime >= n.since
}

func (n newerFS) LayerNames(p string) ([]string, error) {
	names, err := n.ReadDir(p)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, name := range names {
		if n.InLayer(p + "/" + name) {
			out = append(out, name)
		}
	}
	return out, nil
}
