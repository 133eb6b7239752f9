package gitconfig

import "strings"

// ExecCapable reports whether e can make git, or a tool git starts, run a
// program, load other configuration, or otherwise widen what git does on
// its own (hooks, another work tree). reason is a short phrase for a human
// such as "core.fsmonitor runs a program"; it names the setting by its
// pattern, never by the entry's own subsection or value, so it is safe to
// show without escaping.
//
// Matching ignores subsections: a rule for core.pager also matches
// core.<anything>.pager, which git ignores, because refusing costs little.
// Section and key are compared lower-case, as Parse returns them. The list
// errs on the side of refusing; everything below is capable ("*" is any
// subsection, "<key>" any key):
//
//	core.fsmonitor  core.hookspath  core.pager  core.editor  core.sshcommand
//	core.gitproxy  core.askpass  core.alternaterefscommand  core.worktree
//	core.sharedrepository (git then creates group- or world-writable files)
//	core.attributesfile  attr.tree (attributes choose filter, diff and
//	    merge drivers)
//	sequence.editor  gui.editor  ssh.variant  init.templatedir
//	diff.external  diff.*.command  merge.*.driver
//	diff.tool  diff.guitool  merge.tool  merge.guitool (git-mergetool--lib
//	    sources a file by that name: "../x" reaches any file)
//	pull.twohead  pull.octopus (merge strategies: git-merge-<name> runs,
//	    and a "/" in the name makes it a path)
//	gc.recentobjectshook  git-p4.largefilesystem  gitcvs.dbdriver
//	http.cookiefile  http.savecookies (git writes the cookie jar there)
//	*.textconv  *.cmd  *.command  *.program  *.driver  *.helper
//	    (these key names in any section: they name programs by convention)
//	filter.*.<key>  pager.<key>  includeif.*.<key>  include.path
//	alias.<key> (every alias: with "!" it runs a shell command, without
//	    one it expands to options such as grep -O<pager> or
//	    -c core.pager=..., and a repository's alias overrides the user's)
//	mergetool.*.cmd  mergetool.*.path  difftool.*.cmd  difftool.*.path
//	credential.helper  credential.*.helper
//	protocol.allow  protocol.*.allow
//	uploadpack.<key> (packobjectshook among them)
//	remote.*.uploadpack  remote.*.receivepack  remote.*.vcs
//	gpg.program  gpg.*.program  gpg.ssh.defaultkeycommand
//	interactive.difffilter  web.browser  browser.*.cmd  browser.*.path
//	man.*.cmd  man.*.path  guitool.*.cmd  tar.*.command  trailer.*.command
//	trailer.*.cmd  hook.*.<key>  imap.tunnel  instaweb.<key>
//	*.authorsprog (git svn)  lfs.*.path  lfs.*.clean  lfs.*.smudge
//	sendemail.<key> whose key ends in "cmd"
//	sendemail.smtpserver when the value is an absolute path
//	submodule.*.update when the value, trimmed, starts with "!"
//	extensions.worktreeconfig (turns on config.worktree)
//	URLs that name a transport helper ("<helper>::<address>", ext:: among
//	    them): remote.*.url  remote.*.pushurl  submodule.*.url
//	    url.<base>.insteadof and pushinsteadof (the base)  and
//	    branch.*.remote  branch.*.pushremote  remote.pushdefault when they
//	    hold a URL rather than a remote's name (see URL)
//	safe.directory (git honours it only outside the repository; refused anyway)
//
// A URL that is a local path is not capable by itself: pushing to it runs
// that repository's hooks, which matters only when the command could have
// planted them there; URL and LocalPath let the caller decide with what it
// knows of the file system. core.bare is not listed: git init writes it.
func ExecCapable(e Entry) (reason string, ok bool) {
	section, key := strings.ToLower(e.Section), strings.ToLower(e.Key)
	for _, r := range execRules {
		if r.section != "" && r.section != section {
			continue
		}
		if r.key != "" && r.key != key {
			continue
		}
		if r.when != nil && !r.when(key, e) {
			continue
		}
		return r.name + " " + r.why, true
	}
	return "", false
}

// Compare returns the entries of new that are exec-capable (ExecCapable) and
// not present in old with the same section, subsection, key, value and
// NoValue: the capable entries a change from old to new adds. Line numbers
// are ignored, so moving an entry does not report it. Order follows new.
//
// Compare looks only at added entries. It does not notice a change in which
// of several values wins, or a removal that uncovers an earlier entry; those
// entries were already present in old.
func Compare(old, new []Entry) []Entry {
	type id struct {
		section, subsection, key, value string
		noValue                         bool
	}
	key := func(e Entry) id {
		return id{strings.ToLower(e.Section), e.Subsection, strings.ToLower(e.Key), e.Value, e.NoValue}
	}
	seen := make(map[id]bool, len(old))
	for _, e := range old {
		seen[key(e)] = true
	}
	var added []Entry
	for _, e := range new {
		if _, ok := ExecCapable(e); ok && !seen[key(e)] {
			added = append(added, e)
		}
	}
	return added
}

// execRule matches entries by lower-case section and key; an empty field
// matches anything. when, if set, must also hold; it gets the lower-case key.
type execRule struct {
	section, key string
	when         func(key string, e Entry) bool
	name, why    string
}

const (
	runs     = "runs a program"
	includes = "loads other configuration"
)

// execRules is read-only. The first matching rule gives the reason.
var execRules = []execRule{
	{section: "core", key: "fsmonitor", name: "core.fsmonitor", why: runs},
	{section: "core", key: "hookspath", name: "core.hooksPath", why: "chooses the hooks git runs"},
	{section: "core", key: "pager", name: "core.pager", why: runs},
	{section: "core", key: "editor", name: "core.editor", why: runs},
	{section: "core", key: "sshcommand", name: "core.sshCommand", why: runs},
	{section: "core", key: "gitproxy", name: "core.gitProxy", why: runs},
	{section: "core", key: "askpass", name: "core.askPass", why: runs},
	{section: "core", key: "alternaterefscommand", name: "core.alternateRefsCommand", why: runs},
	{section: "core", key: "worktree", name: "core.worktree", why: "moves the work tree git reads and writes"},
	{section: "core", key: "sharedrepository", name: "core.sharedRepository", why: "makes git create files other accounts can write"},
	{section: "core", key: "attributesfile", name: "core.attributesFile", why: "chooses the filter, diff and merge drivers git runs"},
	{section: "attr", key: "tree", name: "attr.tree", why: "chooses the filter, diff and merge drivers git runs"},
	{section: "diff", key: "tool", name: "diff.tool", why: "names a file git-difftool sources"},
	{section: "diff", key: "guitool", name: "diff.guitool", why: "names a file git-difftool sources"},
	{section: "merge", key: "tool", name: "merge.tool", why: "names a file git-mergetool sources"},
	{section: "merge", key: "guitool", name: "merge.guitool", why: "names a file git-mergetool sources"},
	{section: "pull", key: "twohead", name: "pull.twohead", why: "names the merge strategy program git runs"},
	{section: "pull", key: "octopus", name: "pull.octopus", why: "names the merge strategy program git runs"},
	{section: "gc", key: "recentobjectshook", name: "gc.recentObjectsHook", why: runs},
	{section: "git-p4", key: "largefilesystem", name: "git-p4.largeFileSystem", why: "loads code in git p4"},
	{section: "gitcvs", key: "dbdriver", name: "gitcvs.dbDriver", why: "loads a module in git cvsserver"},
	{section: "http", key: "cookiefile", name: "http.cookieFile", why: "makes git write a file there"},
	{section: "http", key: "savecookies", name: "http.saveCookies", why: "makes git write a file there"},
	{section: "sequence", key: "editor", name: "sequence.editor", why: runs},
	{section: "gui", key: "editor", name: "gui.editor", why: runs},
	{section: "ssh", key: "variant", name: "ssh.variant", why: "changes how git runs ssh"},
	{section: "init", key: "templatedir", name: "init.templateDir", why: "installs hooks on git init"},

	{section: "include", key: "path", name: "include.path", why: includes},
	{section: "includeif", name: "includeIf.*", why: includes},
	{section: "extensions", key: "worktreeconfig", name: "extensions.worktreeConfig", why: includes},
	{section: "safe", key: "directory", name: "safe.directory", why: "marks repositories as trusted"},

	{section: "diff", key: "external", name: "diff.external", why: runs},
	{section: "filter", name: "filter.*", why: runs},
	{section: "pager", name: "pager.*", why: runs},
	{section: "alias", name: "alias.*", why: "can run a program (\"!\", or options of the command it expands to) and overrides the user's own"},
	{section: "credential", key: "helper", name: "credential.helper", why: runs},
	{section: "protocol", key: "allow", name: "protocol.allow", why: "allows transports that can run programs"},
	{section: "uploadpack", name: "uploadpack.*", why: "changes what git upload-pack runs"},
	{section: "remote", key: "uploadpack", name: "remote.*.uploadpack", why: runs},
	{section: "remote", key: "receivepack", name: "remote.*.receivepack", why: runs},
	{section: "remote", key: "vcs", name: "remote.*.vcs", why: "runs a remote helper"},
	{section: "gpg", key: "defaultkeycommand", name: "gpg.ssh.defaultKeyCommand", why: runs},
	{section: "interactive", key: "difffilter", name: "interactive.diffFilter", why: runs},
	{section: "web", key: "browser", name: "web.browser", why: runs},
	{section: "mergetool", key: "path", name: "mergetool.*.path", why: runs},
	{section: "difftool", key: "path", name: "difftool.*.path", why: runs},
	{section: "browser", key: "path", name: "browser.*.path", why: runs},
	{section: "man", key: "path", name: "man.*.path", why: runs},
	{section: "hook", name: "hook.*", why: runs},
	{section: "imap", key: "tunnel", name: "imap.tunnel", why: runs},
	{section: "instaweb", name: "instaweb.*", why: runs},
	{section: "lfs", key: "path", name: "lfs.*.path", why: runs},
	{section: "lfs", key: "clean", name: "lfs.*.clean", why: runs},
	{section: "lfs", key: "smudge", name: "lfs.*.smudge", why: runs},
	{section: "sendemail", when: keyEndsWith("cmd"), name: "sendemail.*cmd", why: runs},
	{section: "sendemail", key: "smtpserver", when: absolutePath, name: "sendemail.smtpServer with a path", why: runs},
	{section: "submodule", key: "update", when: valueStartsWith("!"), name: "submodule.*.update with \"!\"", why: runs},
	{when: helperURL, name: "a URL with a transport helper (<helper>::)", why: "runs git-remote-<helper>"},

	{section: "diff", key: "textconv", name: "diff.*.textconv", why: runs},
	{section: "diff", key: "command", name: "diff.*.command", why: runs},
	{section: "merge", key: "driver", name: "merge.*.driver", why: runs},
	{section: "mergetool", key: "cmd", name: "mergetool.*.cmd", why: runs},
	{section: "difftool", key: "cmd", name: "difftool.*.cmd", why: runs},
	{section: "browser", key: "cmd", name: "browser.*.cmd", why: runs},
	{section: "man", key: "cmd", name: "man.*.cmd", why: runs},
	{section: "guitool", key: "cmd", name: "guitool.*.cmd", why: runs},
	{section: "trailer", key: "command", name: "trailer.*.command", why: runs},
	{section: "trailer", key: "cmd", name: "trailer.*.cmd", why: runs},
	{section: "tar", key: "command", name: "tar.*.command", why: runs},
	{section: "gpg", key: "program", name: "gpg.program", why: runs},

	// Key names that denote a program wherever git uses them: diff.*.textconv,
	// diff.*.command, merge.*.driver, mergetool.*.cmd, difftool.*.cmd,
	// browser.*.cmd, man.*.cmd, guitool.*.cmd, trailer.*.cmd,
	// trailer.*.command, tar.*.command, gpg.program, gpg.*.program,
	// credential.*.helper, and any tool's of the same shape.
	{key: "textconv", name: "*.textconv", why: runs},
	{key: "cmd", name: "*.cmd", why: runs},
	{key: "command", name: "*.command", why: runs},
	{key: "program", name: "*.program", why: runs},
	{key: "driver", name: "*.driver", why: runs},
	{key: "helper", name: "*.helper", why: runs},
	{key: "authorsprog", name: "*.authorsProg", why: runs},
}

func valueStartsWith(prefix string) func(string, Entry) bool {
	return func(_ string, e Entry) bool {
		return strings.HasPrefix(strings.TrimSpace(e.Value), prefix)
	}
}

func keyEndsWith(suffix string) func(string, Entry) bool {
	return func(key string, _ Entry) bool { return strings.HasSuffix(key, suffix) }
}

// absolutePath reports a value git send-email would run as a sendmail
// program: an absolute path, counting Windows forms and "~" to be safe.
func absolutePath(_ string, e Entry) bool {
	v := strings.TrimSpace(e.Value)
	return strings.HasPrefix(v, "/") || strings.HasPrefix(v, `\`) || strings.HasPrefix(v, "~") ||
		len(v) >= 2 && v[1] == ':'
}

// helperURL matches URL-carrying entries whose URL names a transport
// helper.
func helperURL(_ string, e Entry) bool {
	u, ok := URL(e)
	if !ok {
		return false
	}
	_, helper := transportHelper(u)
	return helper
}

// URL returns the URL an entry carries, if it is one git fetches from or
// pushes to: remote.*.url, remote.*.pushurl, submodule.*.url, the base of
// url.<base>.insteadOf and pushInsteadOf, and branch.*.remote,
// branch.*.pushRemote and remote.pushDefault when the value is not a
// remote's name (git takes a value with "/" or ":" as a URL; "." is the
// repository itself).
func URL(e Entry) (string, bool) {
	section, key := strings.ToLower(e.Section), strings.ToLower(e.Key)
	switch {
	case section == "remote" && e.Subsection != "" && (key == "url" || key == "pushurl"),
		section == "submodule" && e.Subsection != "" && key == "url":
		return e.Value, !e.NoValue
	case section == "url" && (key == "insteadof" || key == "pushinsteadof"):
		return e.Subsection, e.Subsection != ""
	case section == "branch" && (key == "remote" || key == "pushremote"),
		section == "remote" && e.Subsection == "" && key == "pushdefault":
		if strings.ContainsAny(e.Value, "/:") || e.Value == "." {
			return e.Value, true
		}
	}
	return "", false
}

// transportHelper reports a "<helper>::<address>" URL (git's
// transport_get: "::" before any "://").
func transportHelper(u string) (string, bool) {
	i := strings.Index(u, "::")
	if i <= 0 {
		return "", false
	}
	if j := strings.Index(u, "://"); j >= 0 && j < i {
		return "", false
	}
	return u[:i], true
}

// LocalPath returns the path a URL names when git would take it as a local
// repository (connect.c url_is_local_not_ssh: a file:// URL, or no ":"
// before the first "/"), not a network one.
func LocalPath(u string) (string, bool) {
	if _, ok := transportHelper(u); ok {
		return "", false
	}
	if rest, ok := strings.CutPrefix(u, "file://"); ok {
		return rest, true
	}
	if strings.Contains(u, "://") {
		return "", false
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	if colon < 0 || (slash >= 0 && slash < colon) {
		return u, u != ""
	}
	return "", false
}
