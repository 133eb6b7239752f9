package persist

import "testing"

func TestSafeGitConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want bool
	}{
		{"git init", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", true},
		{"user and remote", "[user]\n\tname = x\n[remote \"origin\"]\n\turl = https://example.org/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n", true},
		{"sha256", "[extensions]\n\tobjectformat = sha256\n", true},
		{"fsmonitor", "[core]\n\tfsmonitor = touch /tmp/x\n", false},
		{"hooksPath", "[core]\n\thooksPath = .h\n", false},
		{"pager", "[core]\n\tpager = sh -c x\n", false},
		{"worktree config", "[extensions]\n\tworktreeConfig = true\n", false},
		{"alias", "[alias]\n\tst = !sh\n", false},
		{"filter", "[filter \"x\"]\n\tclean = sh\n", false},
		{"include", "[include]\n\tpath = ../x\n", false},
		{"credential", "[credential]\n\thelper = !sh\n", false},
		{"section with trailing key", "[core] fsmonitor = x\n", false},
		{"core.worktree", "[core]\n\tworktree = ..\n", false},
		{"remote without name", "[remote]\n\turl = x\n", false},
		{"initialized submodule", "[submodule \"sub\"]\n\turl = https://example.org/s.git\n\tactive = true\n", true},
		{"recursive clone", "[submodule]\n\tactive = .\n[submodule \"sub\"]\n\turl = /srv/sub\n", true},
		{"submodule section key", "[submodule]\n\tfetchJobs = 4\n", false},
		{"submodule update command", "[submodule \"sub\"]\n\tupdate = !sh\n", false},
		{"submodule ext url", "[submodule \"sub\"]\n\turl = ext::sh -c x\n", false},
		{"submodule other key", "[submodule \"sub\"]\n\tpath = x\n", false},
	} {
		if got := safeGitConfig(tc.text); got != tc.want {
			t.Errorf("%s: safeGitConfig = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The workspace's git files are written by the sandboxed command: their
// parsers must never panic, whatever they hold.
func FuzzGitConfig(f *testing.F) {
	for _, s := range []string{
		"[core]\n\thooksPath = x\n", "[include]\npath=\"a\"", "[", "]", "[core \"x\"] a=b", "\x00[user]\nname=\xff",
		"[remote \"o\"]\nurl = ext::sh -c x\n", "gitdir: ../x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		safeGitConfig(text)
	})
}
