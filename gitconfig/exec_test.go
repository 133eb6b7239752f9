package gitconfig

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ent builds an entry from git's flat name ("section.sub.key", any case);
// without a value it is a NoValue entry.
func ent(name string, value ...string) Entry {
	first, last := strings.Index(name, "."), strings.LastIndex(name, ".")
	e := Entry{Section: name[:first], Key: name[last+1:]}
	if first < last {
		e.Subsection = name[first+1 : last]
	}
	if len(value) == 0 {
		e.NoValue = true
	} else {
		e.Value = value[0]
	}
	return e
}

func TestExecCapable(t *testing.T) {
	capable := []struct {
		entry  Entry
		reason string // the whole reason, or "" for any
	}{
		{ent("core.fsmonitor", "./watch"), "core.fsmonitor runs a program"},
		{ent("Core.FSMonitor", "true"), "core.fsmonitor runs a program"},
		{ent("core.hooksPath", ".githooks"), "core.hooksPath chooses the hooks git runs"},
		{ent("core.pager", "less"), "core.pager runs a program"},
		{ent("core.pager"), "core.pager runs a program"},
		{ent("core.editor", "vim"), ""},
		{ent("core.sshCommand", "ssh -i k"), ""},
		{ent("core.gitProxy", "proxy for example.com"), ""},
		{ent("core.askPass", "/bin/ask"), ""},
		{ent("core.alternateRefsCommand", "x"), ""},
		{ent("core.worktree", "/elsewhere"), "core.worktree moves the work tree git reads and writes"},
		{ent("core.Other.pager", "less"), "core.pager runs a program"}, // subsection ignored
		{ent("sequence.editor", "vim"), ""},
		{ent("gui.editor", "vim"), ""},
		{ent("diff.external", "difft"), ""},
		{ent("diff.jpg.textconv", "exif"), "diff.*.textconv runs a program"},
		{ent("diff.jpg.command", "x"), ""},
		{ent("anything.sub.textconv", "x"), "*.textconv runs a program"},
		{ent("filter.lfs.clean", "git-lfs clean -- %f"), "filter.* runs a program"},
		{ent("filter.lfs.smudge", "x"), ""},
		{ent("filter.lfs.process", "x"), ""},
		{ent("filter.lfs.required", "true"), ""},
		{ent("merge.ours.driver", "true"), "merge.*.driver runs a program"},
		{ent("mergetool.vim.cmd", "vim"), ""},
		{ent("mergetool.vim.path", "/bin/vim"), "mergetool.*.path runs a program"},
		{ent("difftool.x.cmd", "x"), ""},
		{ent("difftool.x.path", "x"), ""},
		{ent("credential.helper", "store"), "credential.helper runs a program"},
		{ent("credential.https://example.com.helper", "x"), "credential.helper runs a program"},
		{ent("other.x.helper", "x"), "*.helper runs a program"},
		{ent("other.x.cmd", "x"), "*.cmd runs a program"},
		{ent("other.command", "x"), "*.command runs a program"},
		{ent("other.x.program", "x"), "*.program runs a program"},
		{ent("other.x.driver", "x"), "*.driver runs a program"},
		{ent("include.path", "other"), "include.path loads other configuration"},
		{ent("includeIf.gitdir:/x/.path", "y"), "includeIf.* loads other configuration"},
		{ent("includeif.onbranch:main.anything", "y"), ""},
		{ent("alias.x", "!sh -c evil"), ""},
		{ent("alias.x", "  !sh"), ""},
		// Without "!" an alias still runs programs through the options of
		// the command it expands to, and overrides the user's own alias.
		{ent("alias.co", "checkout"), ""},
		{ent("alias.g", "grep -O./evil"), ""},
		{ent("alias.l", "-c core.pager=./evil log"), ""},
		{ent("alias.x"), ""},
		{ent("core.sharedRepository", "0777"), ""},
		{ent("core.attributesFile", "~/.gitattributes"), ""},
		{ent("attr.tree", "HEAD"), ""},
		{ent("diff.tool", "../../x/evil"), ""},
		{ent("merge.tool", "vimdiff"), ""},
		{ent("merge.guitool", "x"), ""},
		{ent("pull.twohead", "x/../evil"), ""},
		{ent("pull.octopus", "x"), ""},
		{ent("gc.recentObjectsHook", "x"), ""},
		{ent("git-p4.largeFileSystem", "x"), ""},
		{ent("gitcvs.dbDriver", "x"), ""},
		{ent("http.cookieFile", "/home/u/.bashrc"), ""},
		{ent("http.https://example.com.cookieFile", "x"), ""},
		{ent("remote.origin.url", "ext::sh -c evil"), ""},
		{ent("remote.origin.pushurl", "evil::x"), ""},
		{ent("submodule.s.url", "ext::sh"), ""},
		{ent("url.ext::sh -c evil.insteadOf", "https://"), ""},
		{ent("branch.main.remote", "ext::sh -c x"), ""},
		{ent("remote.pushDefault", "x::y"), ""},
		{ent("protocol.allow", "always"), ""},
		{ent("protocol.ext.allow", "always"), ""},
		{ent("uploadpack.packObjectsHook", "x"), "uploadpack.* changes what git upload-pack runs"},
		{ent("uploadpack.allowAnySHA1InWant", "true"), ""},
		{ent("remote.origin.uploadpack", "x"), ""},
		{ent("remote.origin.receivepack", "x"), ""},
		{ent("remote.origin.vcs", "x"), "remote.*.vcs runs a remote helper"},
		{ent("gpg.program", "x"), "gpg.program runs a program"},
		{ent("gpg.ssh.program", "x"), ""},
		{ent("gpg.x509.program", "x"), ""},
		{ent("gpg.ssh.defaultKeyCommand", "x"), ""},
		{ent("pager.log", "false"), "pager.* runs a program"},
		{ent("pager.diff", "delta"), ""},
		{ent("interactive.diffFilter", "delta"), ""},
		{ent("web.browser", "x"), ""},
		{ent("browser.x.cmd", "x"), ""},
		{ent("browser.x.path", "x"), ""},
		{ent("man.x.cmd", "x"), ""},
		{ent("man.x.path", "x"), ""},
		{ent("guitool.x.cmd", "x"), ""},
		{ent("tar.tgz.command", "gzip"), ""},
		{ent("sendemail.toCmd", "x"), "sendemail.*cmd runs a program"},
		{ent("sendemail.ccCmd", "x"), ""},
		{ent("sendemail.headerCmd", "x"), ""},
		{ent("sendemail.sendmailCmd", "x"), ""},
		{ent("sendemail.work.toCmd", "x"), ""},
		{ent("sendemail.smtpServer", "/usr/sbin/sendmail"), ""},
		{ent("sendemail.smtpServer", " ~/bin/x"), ""},
		{ent("sendemail.smtpServer", `C:\x.exe`), ""},
		{ent("submodule.x.update", "!rm -rf ~"), `submodule.*.update with "!" runs a program`},
		{ent("trailer.sign.command", "x"), ""},
		{ent("trailer.sign.cmd", "x"), ""},
		{ent("extensions.worktreeConfig", "true"), ""},
		{ent("safe.directory", "*"), ""},
		{ent("ssh.variant", "simple"), ""},
		{ent("hook.pre-commit.command", "x"), ""},
		{ent("imap.tunnel", "x"), ""},
		{ent("instaweb.httpd", "x"), ""},
		{ent("init.templateDir", "x"), ""},
		{ent("svn.authorsProg", "x"), ""},
		{ent("lfs.customtransfer.x.path", "x"), ""},
		{ent("lfs.extension.x.clean", "x"), ""},
	}
	for _, tc := range capable {
		reason, ok := ExecCapable(tc.entry)
		if !ok || reason == "" || tc.reason != "" && reason != tc.reason {
			t.Errorf("ExecCapable(%s) = %q, %v; want %q, true", formatEntry(tc.entry), reason, ok, tc.reason)
		}
	}

	ordinary := []Entry{
		ent("user.name", "A U Thor"),
		ent("user.email", "a@example.com"),
		ent("user.signingKey", "ABC"),
		ent("core.bare", "false"),
		ent("core.bare"),
		ent("core.fileMode", "true"),
		ent("core.repositoryFormatVersion", "0"),
		ent("core.logAllRefUpdates", "true"),
		ent("core.autocrlf", "input"),
		ent("core.excludesFile", "~/.gitignore"),
		ent("remote.origin.url", "git@github.com:o/r.git"),
		ent("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
		ent("branch.main.merge", "refs/heads/main"),
		ent("branch.main.remote", "origin"),
		ent("remote.origin.url", "https://example.com/r.git"),
		ent("remote.origin.url", "ssh://git@example.com/r.git"),
		ent("remote.origin.url", "/srv/git/r.git"),
		ent("url.https://mirror.example.com/.insteadOf", "https://example.com/"),
		ent("branch.main.remote", "."),
		ent("submodule.x.update", "rebase"),
		ent("submodule.x.url", "https://example.com/x"),
		ent("sendemail.smtpServer", "smtp.example.com"),
		ent("sendemail.from", "a@example.com"),
		ent("color.ui", "auto"),
		ent("diff.algorithm", "histogram"),
		ent("diff.jpg.binary", "true"),
		ent("merge.conflictStyle", "zdiff3"),
		ent("pull.rebase", "true"),
		ent("init.defaultBranch", "main"),
		ent("lfs.repositoryformatversion", "0"),
		ent("lfs.https://example.com/r.git/info/lfs.access", "basic"),
		ent("gpg.format", "ssh"),
		ent("commit.gpgSign", "true"),
	}
	for _, e := range ordinary {
		if reason, ok := ExecCapable(e); ok {
			t.Errorf("ExecCapable(%s) = %q, true; want false", formatEntry(e), reason)
		}
	}
}

func TestExecCapableFromParse(t *testing.T) {
	// Entries as Parse returns them, including odd but valid spellings.
	entries, err := Parse([]byte(`[CORE]
	FSMonitor
[Filter "lfs"]
	clean = git-lfs clean -- %f
[alias]
	x = "!sh"
	y = \
	    !sh
[core] pager=less
[user]
	name = A
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if reason, ok := ExecCapable(e); ok {
			got = append(got, fmt.Sprintf("%d %s", e.Line, reason))
		}
	}
	want := []string{
		"2 core.fsmonitor runs a program",
		"4 filter.* runs a program",
		`6 alias.* can run a program ("!", or options of the command it expands to) and overrides the user's own`,
		`7 alias.* can run a program ("!", or options of the command it expands to) and overrides the user's own`,
		"9 core.pager runs a program",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestCompare(t *testing.T) {
	base := []Entry{
		{Section: "core", Key: "bare", Value: "false", Line: 1},
		{Section: "core", Key: "pager", Value: "less", Line: 2},
		{Section: "filter", Subsection: "lfs", Key: "clean", Value: "git-lfs clean -- %f", Line: 3},
		{Section: "core", Key: "fsmonitor", NoValue: true, Line: 4},
	}
	moved := slices.Clone(base)
	slices.Reverse(moved)
	for i := range moved {
		moved[i].Line = 10 + i
	}
	tests := []struct {
		name     string
		old, new []Entry
		want     []string
	}{
		{name: "both empty"},
		{name: "unchanged", old: base, new: base},
		{name: "reordered and moved", old: base, new: moved},
		{name: "all new", new: base, want: []string{`2 core pager = "less"`, `3 filter "lfs" clean = "git-lfs clean -- %f"`, `4 core fsmonitor`}},
		{name: "removed", old: base, new: base[:1]},
		{name: "ordinary entry added", old: base, new: append(slices.Clone(base), ent("user.name", "x"))},
		{name: "value changed", old: base, new: []Entry{base[0], {Section: "core", Key: "pager", Value: "sh -c evil", Line: 2}},
			want: []string{`2 core pager = "sh -c evil"`}},
		{name: "novalue changed to empty value", old: base, new: []Entry{{Section: "core", Key: "fsmonitor", Line: 4}},
			want: []string{`4 core fsmonitor = ""`}},
		{name: "subsection changed", old: base, new: []Entry{{Section: "filter", Subsection: "LFS", Key: "clean", Value: "git-lfs clean -- %f", Line: 3}},
			want: []string{`3 filter "LFS" clean = "git-lfs clean -- %f"`}},
		{name: "section case ignored", old: base, new: []Entry{{Section: "CORE", Key: "Pager", Value: "less", Line: 2}}},
		{name: "duplicate of existing", old: base, new: append(slices.Clone(base), base[1])},
		{name: "alias gains bang", old: []Entry{ent("alias.x", "status")}, new: []Entry{ent("alias.x", "!status")},
			want: []string{`0 alias x = "!status"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatEntries(Compare(tc.old, tc.new)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func ExampleCompare() {
	before, _ := Parse([]byte("[core]\n\tbare = false\n[alias]\n\tst = status\n"))
	after, _ := Parse([]byte("[core]\n\tbare = false\n\tfsmonitor = ./x\n[alias]\n\tst = status\n\tup = !./x\n[user]\n\tname = A\n"))
	for _, e := range Compare(before, after) {
		reason, _ := ExecCapable(e)
		fmt.Printf("line %d: %s\n", e.Line, reason)
	}
	// Output:
	// line 3: core.fsmonitor runs a program
	// line 6: alias.* can run a program ("!", or options of the command it expands to) and overrides the user's own
}

func TestURLAndLocalPath(t *testing.T) {
	tests := []struct {
		entry Entry
		url   string // "" when the entry carries none
		local string // "" when the URL is not a local path
	}{
		{ent("remote.origin.url", "https://example.com/r.git"), "https://example.com/r.git", ""},
		{ent("remote.origin.url", "git@example.com:r.git"), "git@example.com:r.git", ""},
		{ent("remote.origin.url", "/srv/r.git"), "/srv/r.git", "/srv/r.git"},
		{ent("remote.origin.url", "../r.git"), "../r.git", "../r.git"},
		{ent("remote.origin.url", "./a:b"), "./a:b", "./a:b"},
		{ent("remote.origin.pushurl", "file:///srv/r.git"), "file:///srv/r.git", "/srv/r.git"},
		{ent("remote.origin.url", "ext::sh -c x"), "ext::sh -c x", ""},
		{ent("submodule.s.url", "r.git"), "r.git", "r.git"},
		{ent("url./cache/evil.git.insteadOf", "https://example.com/"), "/cache/evil.git", "/cache/evil.git"},
		{ent("url./cache/evil.git.pushInsteadOf", "https://example.com/"), "/cache/evil.git", "/cache/evil.git"},
		{ent("branch.main.remote", "origin"), "", ""},
		{ent("branch.main.remote", "."), ".", "."},
		{ent("branch.main.pushRemote", "/cache/evil.git"), "/cache/evil.git", "/cache/evil.git"},
		{ent("remote.pushDefault", "origin"), "", ""},
		{ent("remote.pushDefault", "/x"), "/x", "/x"},
		{ent("remote.origin.fetch", "/x"), "", ""},
		{ent("user.name", "/x"), "", ""},
	}
	for _, tc := range tests {
		u, ok := URL(tc.entry)
		if ok != (tc.url != "") || u != tc.url {
			t.Errorf("URL(%s) = %q, %v; want %q", formatEntry(tc.entry), u, ok, tc.url)
			continue
		}
		if !ok {
			continue
		}
		l, ok := LocalPath(u)
		if ok != (tc.local != "") || l != tc.local {
			t.Errorf("LocalPath(%q) = %q, %v; want %q", u, l, ok, tc.local)
		}
	}
}
