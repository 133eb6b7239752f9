package persist

import (
	"os"
	"path/filepath"
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
