package runcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenHelper: a separate helper is used only when it and its
// directory belong to root or to sandboxd's owner (root alone for a root
// sandboxd), nobody else may write them, and it is a regular file everyone
// may execute; otherwise sandboxd runs itself, saying why.
func TestOpenHelper(t *testing.T) {
	me := os.Geteuid()
	other := 4242 // owns neither sandboxd nor anything else here
	for _, tc := range []struct {
		name    string
		dirMode os.FileMode
		mode    os.FileMode // 0: no helper at all
		link    bool        // the helper is a symlink to a good file
		owner   int         // the helper's owner (needs root to be other than me)
		exe     int         // the owner of sandboxd's executable
		root    bool        // sandboxd runs as root
		above   os.FileMode // the mode of the directory above bin (0: 0755)
		used    bool
		why     string
		refused bool
	}{
		{name: "good", dirMode: 0o755, mode: 0o755, owner: me, exe: me, used: true},
		{name: "missing", dirMode: 0o755, why: "there is no sandboxd-helper beside it"},
		{name: "group-writable", dirMode: 0o755, mode: 0o775, owner: me, exe: me, why: "may be written by its group or others", refused: true},
		{name: "world-writable", dirMode: 0o755, mode: 0o757, owner: me, exe: me, why: "may be written by its group or others", refused: true},
		{name: "directory group-writable", dirMode: 0o775, mode: 0o755, owner: me, exe: me, why: "its directory may be written", refused: true},
		{name: "not executable by all", dirMode: 0o755, mode: 0o700, owner: me, exe: me, why: "not executable by everyone", refused: true},
		{name: "symlink", dirMode: 0o755, mode: 0o755, link: true, owner: me, exe: me, why: "not a regular file", refused: true},
		{name: "another owner", dirMode: 0o755, mode: 0o755, owner: other, exe: me, why: "is owned by uid 4242, neither root nor sandboxd's owner", refused: true},
		{name: "a directory above writable by others", dirMode: 0o755, mode: 0o755, owner: me, exe: me, above: 0o777,
			why: "above it may be written by its group or others", refused: true},
		{name: "a directory above others may not pass", dirMode: 0o755, mode: 0o755, owner: me, exe: me, above: 0o750,
			why: "may not be passed through by everyone", refused: true},
		{name: "its directory others may not pass", dirMode: 0o750, mode: 0o755, owner: me, exe: me,
			why: "its directory may not be passed through by everyone", refused: true},
		{name: "a sticky directory above", dirMode: 0o755, mode: 0o755, owner: me, exe: me, above: 0o777 | os.ModeSticky, used: true},
		{name: "sandboxd's owner, not root's, for a root sandboxd", dirMode: 0o755, mode: 0o755, owner: other, exe: other, root: true, why: "not root (sandboxd runs as root)", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.owner != me && me != 0 {
				t.Skip("giving a file away needs root")
			}
			if me != 0 && tc.root {
				t.Skip("a root sandboxd's case needs root")
			}
			base := t.TempDir() // in /tmp: sticky, which sandboxd accepts above
			// Everyone may pass through, as a run's helper must.
			os.Chmod(filepath.Dir(base), 0o755)
			os.Chmod(base, 0o755)
			dir := filepath.Join(base, "bin")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.above != 0 {
				os.Chmod(base, tc.above)
				defer os.Chmod(base, 0o700)
			}
			if tc.mode != 0 {
				p := filepath.Join(dir, helperName)
				if tc.link {
					p = filepath.Join(dir, "real")
					if err := os.Symlink("real", filepath.Join(dir, helperName)); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				os.Chmod(p, tc.mode)
				os.Lchown(p, tc.owner, -1)
				if tc.link {
					os.Lchown(filepath.Join(dir, helperName), tc.owner, -1)
				}
			}
			os.Chmod(dir, tc.dirMode)
			f, why, refused := openHelper(dir, tc.exe, tc.root)
			if f != nil {
				defer f.Close()
			}
			if (f != nil) != tc.used || !strings.Contains(why, tc.why) || refused != tc.refused {
				t.Fatalf("openHelper: used %v, why %q, refused %v; want used %v, why containing %q, refused %v",
					f != nil, why, refused, tc.used, tc.why, tc.refused)
			}
		})
	}
}
