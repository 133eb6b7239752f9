package persist

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The recogniser is checked against the real git: for small random trees
// made of the pieces git looks at (HEAD, objects, refs, commondir, .git
// as a directory, file or symlink), Discover and `git rev-parse
// --git-dir` must agree on whether there is a repository, where it is,
// and whether git gives up with an error.

// treePaths are the entries a generated tree may have, parents first.
var treePaths = []string{
	".git", ".git/HEAD", ".git/objects", ".git/refs", ".git/commondir",
	"HEAD", "objects", "refs", "commondir",
	"x", "x/HEAD", "x/objects", "x/refs", "x/commondir",
}

// treeContents are file contents (SIB is the sibling repository's path).
var treeContents = []string{
	"ref: refs/heads/main\n", "ref: refs/heads/main\n", "ref: refs/heads/main\n", "gitdir: x\n", "gitdir: SIB\n", "ref:\trefs/x", "ref: refs", "refs/heads/x", "ref:refs/",
	"0123456789abcdef0123456789abcdef01234567\n", "0123456789ABCDEF0123456789ABCDEF01234567",
	"0123456789abcdef0123456789abcdef0123456", "0123456789abcdef0123456789abcdef01234567garbage",
	"\vref: refs/heads/x", "ref:\v refs/heads/x", "ref:\f refs/", "ref: \r\n refs/", "", "\x00ref: refs/", "ref: refs/\x00",
	"gitdir: x", "gitdir: .git", "gitdir: SIB", "gitdir: x\n", "gitdir:x", "gitdir: x\r\n", "gitdir:  x", "gitdir: SIB\n\n",
	"gitdir: ../sib", "gitdir: x/../x", "gitdir: l/..", "..", ".", "x", "SIB", "SIB\n", "\n", "../sib\r", "x/", "nonexistent", "nonexistent/deeper",
}

// treeTargets are symlink targets.
var treeTargets = []string{
	"refs/heads/main", "refs", "refsx", "x", ".git", "../sib", "SIB", "SIB/objects", "/usr", "/nonexistent",
	"objects", "x/objects", "dangling", "HEAD", "x/HEAD", "l", "..", ".", "SIB/HEAD", ".git/HEAD",
}

// buildTree makes a tree in dir from b: for each of treePaths one byte
// picks absent, directory, file (with content and mode) or symlink.
func buildTree(t testing.TB, dir, sib string, b []byte) string {
	t.Helper()
	var desc []string
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	sub := func(s string) string { return strings.ReplaceAll(s, "SIB", sib) }
	for _, p := range treePaths {
		full := filepath.Join(dir, p)
		if st, err := os.Lstat(filepath.Dir(full)); err != nil || !st.IsDir() {
			continue
		}
		c := next()
		// Each name gets the shapes git meets most often, so that most
		// trees are near misses of a repository rather than noise.
		shapes := map[string]string{"HEAD": "ffffslad", "objects": "dddslfax", "refs": "dddslfax",
			"commondir": "aaaaffsl", ".git": "dddffsla", "x": "dddddsla"}[filepath.Base(p)]
		switch shapes[int(c)%len(shapes)] {
		case 'a':
			continue
		case 'd':
			os.Mkdir(full, 0o755)
			desc = append(desc, p+"/")
		case 'f', 'x':
			content := sub(treeContents[int(next())%len(treeContents)])
			mode := os.FileMode(0o644)
			if shapes[int(c)%len(shapes)] == 'x' || c&0x80 != 0 {
				mode = 0o755
			}
			os.WriteFile(full, []byte(content), mode)
			os.Chmod(full, mode)
			desc = append(desc, fmt.Sprintf("%s=%q(%o)", p, content, mode))
		case 's', 'l':
			target := sub(treeTargets[int(next())%len(treeTargets)])
			os.Symlink(target, full)
			desc = append(desc, p+"->"+target)
		}
	}
	// A symlink "l" some contents go through.
	os.Symlink("x", filepath.Join(dir, "l"))
	return strings.Join(desc, " ")
}

// sibling is a valid repository next to the generated trees.
func sibling(t testing.TB, base string) string {
	t.Helper()
	sib := filepath.Join(base, "sib")
	for _, d := range []string{"objects", "refs"} {
		if err := os.MkdirAll(filepath.Join(sib, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sib, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return sib
}

// gitSays runs git rev-parse --git-dir in dir, looking no higher.
func gitSays(t testing.TB, dir string) (string, Git, string) {
	t.Helper()
	home := filepath.Join(filepath.Dir(dir), "home")
	os.MkdirAll(home, 0o755)
	cmd := exec.Command("git", "rev-parse", "--git-dir")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir), "LANG=C"}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	msg := strings.TrimSpace(errb.String())
	if err != nil {
		if strings.Contains(msg, "not a git repository (or any") {
			return "", NotGitDir, msg
		}
		return "", Fatal, msg
	}
	p := strings.TrimSpace(out.String())
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p, GitDir, msg
}

func checkAgainstGit(t *testing.T, base string, n int, b []byte) {
	t.Helper()
	dir := filepath.Join(base, fmt.Sprintf("t%d", n))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	desc := buildTree(t, dir, filepath.Join(base, "sib"), b)
	want, wantV, msg := gitSays(t, dir)
	got, v := Discover(Host{}, dir)
	gd := got.GitDir
	if r, err := filepath.EvalSymlinks(gd); err == nil && gd != "" {
		gd = r
	}
	if v != wantV || (v == GitDir && gd != want) {
		t.Errorf("tree %s:\n  git: %v %q (%s)\n  recogniser: %v %q", desc, wantV, want, msg, v, gd)
	}
}

func TestDiscoverAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed to check the recogniser: %v", err)
	}
	base := t.TempDir()
	sibling(t, base)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		b := make([]byte, 2*len(treePaths))
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		checkAgainstGit(t, base, i, b)
	}
}

func FuzzDiscoverAgainstGit(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Fatalf("git is needed to check the recogniser: %v", err)
	}
	// .git directory; bare; gitfile; commondir; HEAD symlink.
	f.Add([]byte{1, 2, 0, 1, 1})
	f.Add([]byte{0, 2, 0, 1, 1})
	f.Add([]byte{2, 18})
	f.Add([]byte{1, 2, 0, 3, 7, 3, 8, 2, 30})
	f.Add([]byte{1, 3, 0, 1, 1})
	base := f.TempDir()
	sibling(f, base)
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		n++
		checkAgainstGit(t, base, n, b)
	})
}
