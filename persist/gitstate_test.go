package persist

import "testing"

func TestTodoExec(t *testing.T) {
	for todo, want := range map[string]int{
		"pick 1234 x\n":                        0,
		"pick 1234 x\nexec make test\n":        2,
		"  exec\tcmd":                          1,
		"\t\tx\tcmd\r\n":                       1,
		"x cmd":                                1,
		"exec":                                 1,
		"execute cmd":                          0,
		"xfoo":                                 0,
		"# exec cmd\n":                         0,
		"pick 1 a\r\nEXEC cmd\n":               0, // git rejects the list
		"pick 1 a\nreword 2 b\nfixup 3 c\nx y": 4,
		"":                                     0,
	} {
		if got := todoExec([]byte(todo)); got != want {
			t.Errorf("todoExec(%q) = %d, want %d", todo, got, want)
		}
	}
}

func TestStateRisk(t *testing.T) {
	for _, tc := range []struct {
		dir, file, content string
		bad                bool
	}{
		{"rebase-merge", "git-rebase-todo", "pick 1 a\nexec evil\n", true},
		{"rebase-merge", "git-rebase-todo", "pick 1 a\n", false},
		{"rebase-merge", "done", "exec evil\n", false}, // already run
		{"rebase-merge", "strategy", "ort\n", false},
		{"rebase-merge", "strategy", "recursive", false},
		{"rebase-merge", "strategy", "x/../evil.sh\n", true},
		{"rebase-merge", "strategy", "evil", true},
		{"sequencer", "todo", "pick 1 a\n", false},
		{"sequencer", "opts", "[options]\n\tstrategy = ours\n", false},
		{"sequencer", "opts", "[options]\n\tstrategy = x/../evil.sh\n", true},
		{"sequencer", "opts", "[options\n", true},
		{"rebase-apply", "patch", "exec evil", false},
	} {
		if _, bad := stateRisk(tc.dir, tc.file, []byte(tc.content)); bad != tc.bad {
			t.Errorf("stateRisk(%s/%s, %q) = %v, want %v", tc.dir, tc.file, tc.content, bad, tc.bad)
		}
	}
}

func TestRemoteURLs(t *testing.T) {
	got := remoteURLs("remotes", []byte("URL: ext::sh -c x\nPush: refs/heads/*\nURL:  /srv/r.git  \nPull: x\n"))
	if len(got) != 2 || got[0] != "ext::sh -c x" || got[1] != "/srv/r.git" {
		t.Errorf("remotes: %q", got)
	}
	got = remoteURLs("branches", []byte("/srv/r.git#main\nignored\n"))
	if len(got) != 1 || got[0] != "/srv/r.git" {
		t.Errorf("branches: %q", got)
	}
}

// The sequencer and remote files are written by the sandboxed command:
// their readers must never panic, whatever they hold.
func FuzzGitState(f *testing.F) {
	for _, s := range []string{"exec x\n", "x\tcmd\r\n", "[options]\nstrategy=a/../b\n", "URL: ext::x\n", "\x00exec", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		todoExec([]byte(s))
		for _, file := range []string{"git-rebase-todo", "strategy", "opts"} {
			stateRisk("sequencer", file, []byte(s))
		}
		remoteURLs("remotes", []byte(s))
		remoteURLs("branches", []byte(s))
	})
}
