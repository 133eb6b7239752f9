package persist

import (
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestHostGuard(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "proj")
	write := func(rel, content string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("home/.gitconfig", "[include]\n\tpath = ~/.config/git/extra\n[core]\n\thooksPath = ~/githooks\n\tpager = ~/tools/mypager -R\n[user]\n\tname = x\n")
	write("home/.config/git/extra", "[credential]\n\thelper = /opt/cred/helper --store\n")
	write("home/.bashrc", "export NVM_DIR=\"$HOME/.nvm\"\n[ -s \"$NVM_DIR/nvm.sh\" ] && \\. \"$NVM_DIR/nvm.sh\"\nsource ~/.aliases.sh; . $UNSET/x.sh\n")
	write("home/opt/tool/real", "#!/bin/sh\n")
	write("home/notes.txt", "x\n")
	write("home/other/.git/HEAD", "ref: refs/heads/main\n")
	os.MkdirAll(filepath.Join(home, "other", ".git", "objects"), 0o755)
	os.MkdirAll(filepath.Join(home, "other", ".git", "refs"), 0o755)
	write("home/bare.git/HEAD", "ref: refs/heads/main\n")
	os.MkdirAll(filepath.Join(home, "bare.git", "objects"), 0o755)
	os.MkdirAll(filepath.Join(home, "bare.git", "refs"), 0o755)
	bin := filepath.Join(root, "pathbin")
	os.MkdirAll(bin, 0o755)
	if err := os.Symlink(filepath.Join(home, "opt/tool/real"), filepath.Join(bin, "tool")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(ws, 0o755)
	g := NewHostGuard(HostConfig{Home: home, ConfigHome: filepath.Join(home, ".config"), DataHome: filepath.Join(home, ".local/share"),
		Workspace: ws, Path: []string{bin, "", "relative/bin"}, GitConfigs: []string{filepath.Join(home, ".gitconfig")},
		Names: NewMatcher(Builtin())})
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"home/.bashrc", true},
		{"home/.profile", true},
		{"home/.zshenv", true},
		{"home/.config/fish/conf.d/x.fish", true},
		{"home/.config/systemd/user/evil.service", true},
		{"home/.config/systemd", true},
		{"home/.config/autostart/x.desktop", true},
		{"home/.config/environment.d/90-x.conf", true},
		{"home/.pam_environment", true},
		{"home/.local/share/dbus-1/services/org.x.service", true},
		{"home/.local/lib/python3.11/site-packages/evil.pth", true},
		{"home/.pyenv/versions/3.11.7/lib/python3.11/site-packages/evil.pth", true},
		{"home/.local/bin/git", true},
		{"home/bin/ls", true},
		{"home/.local/bin", true},
		{"pathbin/newtool", true},
		{"home/opt/tool/real", true}, // a PATH symlink points at it
		{"home/.gitconfig", true},
		{"home/.config/git/extra", true},
		{"home/githooks/pre-commit", true},
		{"home/tools/mypager", true},
		{"opt/cred/helper", false}, // /opt/cred is absolute: outside root
		{"home/.nvm/nvm.sh", true},
		{"home/.aliases.sh", true},
		{"home/other/.git/hooks/post-checkout", true},
		{"home/other/.git/config", true},
		{"home/bare.git/hooks/pre-receive", true},
		{"home/other/.envrc", true},
		{"home/other/.vscode/tasks.json", true},
		{"home/.claude/settings.json", true},
		{"home/.cargo/config.toml", true},
		{"home/other/node_modules/x/.envrc", false},
		{"home/other/AGENTS.md", false}, // instructions, not a program
		{"home/notes.txt", false},
		{"home/other/src/main.go", false},
		{"home/.local/lib/python3.11/site-packages/mod.py", true}, // shadows a system module
		{"home/.cache/x", false},
		{"home/proj/.bashrc", false}, // the workspace: the commit's rules
		{"home/proj/.git/hooks/x", false},
	} {
		p := filepath.Join(root, tc.rel)
		why, got := g.Startup(p)
		if got != tc.want {
			t.Errorf("Startup(%s) = %v (%s), want %v", tc.rel, got, why, tc.want)
		}
		if got && why == "" {
			t.Errorf("Startup(%s): no reason", tc.rel)
		}
	}
	if why, ok := g.Startup("/opt/cred/helper"); !ok {
		t.Errorf("the credential helper your git config runs is not a start-up location (%s)", why)
	}
}

func TestSourcedPaths(t *testing.T) {
	got := sourcedPaths(`# comment: source /nope
export A=/opt/a
B="$A/b"; source "$B/x.sh"
[ -f ~/.x ] && . ~/.x
. ${HOME}/y.sh # trailing
source $UNKNOWN/z.sh
source ~/glob*.sh
`, "/h")
	want := []string{"/opt/a/b/x.sh", "/h/.x", "/h/y.sh"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// The locations are guarded under every spelling: a home or PATH
// directory reached through a symlink, a ~ in PATH, the default XDG
// directories beside the caller's own, and another repository's own
// core.hooksPath.
func TestHostGuardSpellings(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real-home")
	os.MkdirAll(filepath.Join(real, "mybin"), 0o755)
	if err := os.Symlink(real, filepath.Join(root, "home")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "mybin"), filepath.Join(real, "bin-link")); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	other := filepath.Join(root, "other")
	tree(t, other, map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n\thooksPath = tools/hooks\n", "tools/hooks/pre-commit": "x"})
	g := NewHostGuard(HostConfig{Home: home, ConfigHome: filepath.Join(home, ".xdg"), DataHome: filepath.Join(home, ".xdgdata"),
		Path: []string{filepath.Join(home, "bin-link"), "~/tools/bin"}, Names: NewMatcher(Builtin())})
	for _, tc := range []struct {
		p    string
		want bool
	}{
		{filepath.Join(real, ".local/bin/git"), true},
		{filepath.Join(real, ".config/systemd/user/x.service"), true},
		{filepath.Join(real, ".config/environment.d/x.conf"), true},
		{filepath.Join(home, ".xdg/systemd/user/x.service"), true},
		{filepath.Join(real, ".local/share/dbus-1/services/x.service"), true},
		{filepath.Join(real, "mybin/ls"), true},
		{filepath.Join(real, "tools/bin/ls"), true},
		{filepath.Join(other, "tools/hooks/pre-commit"), true},
		{filepath.Join(other, "tools/other.sh"), false},
		{filepath.Join(real, "notes.txt"), false},
	} {
		if why, got := g.Startup(tc.p); got != tc.want {
			t.Errorf("Startup(%s) = %v (%s), want %v", tc.p, got, why, tc.want)
		}
	}
}

// oldLinks is readLinks as it was, every directory read under each of
// its names and every link resolved whole by EvalSymlinks: the answer
// readLinks must still give.
func oldLinks(dirs map[string]string) map[string]string {
	links := map[string]string{}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			t, err := filepath.EvalSymlinks(filepath.Join(d, e.Name()))
			if err != nil {
				continue
			}
			if _, ok := links[t]; !ok {
				links[t] = filepath.Join(d, e.Name()) + " on your PATH runs it"
			}
		}
	}
	return links
}

// What PATH's links point at is found as EvalSymlinks finds it, with the
// same reason, when a directory has two names (/bin and /usr/bin), links
// go through an alternatives directory, up with "..", to links of links,
// to nothing and round in a loop; and on this machine's own PATH.
func TestHostGuardLinks(t *testing.T) {
	root := t.TempDir()
	tree(t, root, map[string]string{"usr/bin/real": "x", "usr/lib/tool/tool.py": "x", "opt/x/bin/prog": "x", "usr/bin/.hidden": "x"})
	for _, l := range [][2]string{
		{"usr/bin", "bin"}, // a second name for the directory
		{"/etc/alternatives/editor", "usr/bin/editor"},
		{"../lib/tool/tool.py", "usr/bin/tool"},  // up with ..
		{"real", "usr/bin/same"},                 // beside it
		{"same", "usr/bin/chain"},                // a link of a link
		{root + "/alt/ed", "usr/bin/ed"},         // through an alternatives directory...
		{root + "/usr/bin/real", "alt/ed"},       // ...to the program
		{"./real", "usr/bin/dot"},                // a "." element
		{"../../opt/x/bin/prog", "usr/bin/prog"}, // .. twice
		{"missing", "usr/bin/dangling"},
		{"loop2", "usr/bin/loop1"},
		{"loop1", "usr/bin/loop2"},
		{root + "/bin/../usr/bin/real", "usr/bin/via"}, // .. after a link
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(l[1])), 0o755)
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	host := strings.Split(os.Getenv("PATH"), string(os.PathListSeparator))
	for name, path := range map[string][]string{
		"tree": {filepath.Join(root, "bin"), filepath.Join(root, "usr/bin"), filepath.Join(root, "nowhere")},
		"host": append(host, "/bin", "/sbin", "/usr/bin", "/usr/sbin"),
	} {
		g := NewHostGuard(HostConfig{Path: path, Names: NewMatcher(Builtin())})
		g.readLinks()
		want := oldLinks(g.dirs)
		if name == "tree" && len(want) < 3 {
			t.Fatalf("the tree's links: %v", want)
		}
		if !maps.Equal(g.links, want) {
			for k, v := range want {
				if g.links[k] != v {
					t.Errorf("%s: %s: %q, want %q", name, k, g.links[k], v)
				}
			}
			for k, v := range g.links {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: %s: %q, not a target", name, k, v)
				}
			}
		}
	}
}
