package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBoundaryThroughLinks: a refused write is reported under the name
// of the object it would have reached, however the command names it:
// through its own descriptor or working-directory links, through a
// workspace directory it replaced by a symlink in its layer, or through a
// dangling symlink it creates a file by.
func TestBoundaryThroughLinks(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		out := filepath.Dir(e.outside("a.txt", "a\n"))
		for _, f := range []string{"b.txt", "c.txt"} {
			e.outside(f, f+"\n")
		}
		os.MkdirAll(filepath.Join(e.ws, "sub"), 0o755)
		e.chown(filepath.Join(e.ws, "sub"))
		dangling := filepath.Join(out, "d-new.txt")
		r := e.sh(strings.Join([]string{
			"exec 3<" + out + "; echo x >> /proc/self/fd/3/a.txt",
			"(cd " + out + " && echo x >> /proc/self/cwd/b.txt)",
			"rm -r sub && ln -s " + out + " sub && echo x >> sub/c.txt",
			"ln -s " + dangling + " dl && echo x > dl",
			"echo END",
		}, "; "))
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("the command did not run\n%s", r)
		}
		got := map[string]bool{}
		for _, b := range boundaries(r) {
			p, _ := b["path"].(string)
			got[b["operation"].(string)+" "+p] = true
		}
		for _, want := range []string{
			"write_file " + filepath.Join(out, "a.txt"),
			"write_file " + filepath.Join(out, "b.txt"),
			"write_file " + filepath.Join(out, "c.txt"),
			"make_reg " + dangling,
		} {
			if !got[want] {
				t.Errorf("missing boundary %q; got %v\n%s", want, got, r)
			}
		}
		for f, want := range map[string]string{"a.txt": "a\n", "b.txt": "b.txt\n", "c.txt": "c.txt\n"} {
			if b, _ := os.ReadFile(filepath.Join(out, f)); string(b) != want {
				t.Errorf("%s changed: %q", f, b)
			}
		}
		if _, err := os.Lstat(dangling); err == nil {
			t.Errorf("%s was created", dangling)
		}
	})
}
