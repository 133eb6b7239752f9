package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// foreignGID is a group neither identity has: Debian's "staff".
const foreignGID = 50

// TestLayerForeignGroup: a workspace whose files belong to another group
// than the one the sandbox maps. An unprivileged caller's layer cannot
// hold the group (EOVERFLOW: its user namespace maps its own group only,
// and nothing unprivileged can map another); root's id-mapped workspace
// refuses the write (EACCES). Either way the run says so, naming the
// group and what works, the host file stays as it was, writes elsewhere
// in the workspace still commit, and (unprivileged) --no-transaction
// writes the file.
func TestLayerForeignGroup(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		f := filepath.Join(e.ws, "shared", "notes.txt")
		e.writeFile(f, "before\n", 0o664)
		for _, p := range []string{filepath.Dir(f), f} {
			if err := os.Chown(p, e.id.uid, foreignGID); err != nil {
				t.Fatal(err)
			}
		}
		r := e.sh(`echo after >> shared/notes.txt; touch shared/new; mkdir -p mine && echo ok > mine/ok; echo END`)
		netRan(t, r)
		got, _ := os.ReadFile(f)
		mine, _ := os.ReadFile(filepath.Join(e.ws, "mine", "ok"))
		if string(mine) != "ok\n" {
			t.Errorf("a write outside the group's files did not commit\n%s", r)
		}
		if e.id.root() {
			// The id-mapped workspace maps the workspace's group only:
			// the write is refused, and the run says why.
			if string(got) != "before\n" {
				t.Errorf("the file changed on the host: %q", got)
			}
			for _, want := range []string{"files of group staff (gid 50)", "EACCES", "chgrp staff"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q\n%s", want, r)
				}
			}
			return
		}
		if string(got) != "before\n" {
			t.Errorf("the file changed on the host: %q", got)
		}
		for _, want := range []string{"files of group staff (gid 50)", "EOVERFLOW", "--no-transaction", "sg staff -c"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q\n%s", want, r)
			}
		}
		e.runArgs = []string{"--no-transaction"}
		e.sh(`echo direct >> shared/notes.txt`).mustSucceed(t)
		if got, _ := os.ReadFile(f); string(got) != "before\ndirect\n" {
			t.Errorf("--no-transaction did not write the file: %q", got)
		}
	})
}
