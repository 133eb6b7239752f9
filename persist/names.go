package persist

import (
	"path"
	"strings"
)

// Kind says what sandboxd does with a change at a name.
type Kind int

const (
	// Protect: a program on the host runs or loads the file without being
	// asked (on cd, on opening the folder, when an agent starts, when git
	// runs a hook). A change at or below it is never committed.
	Protect Kind = iota
	// Instruction: text a tool reads and acts on (an agent's
	// instructions), not a program. Committed, and listed so the person
	// sees what the next session will read.
	Instruction
)

// Name is one persistence name. Pattern is a workspace-relative path
// whose elements may be globs (path.Match); it applies at every depth:
// "a/b" matches "a/b", "x/a/b" and everything below either.
type Name struct {
	Pattern string
	Kind    Kind
	// Tool and When say which tool runs or reads it, and when: shown to
	// the person as the reason.
	Tool, When string
}

// Why is the reason shown for a change at the name.
func (n Name) Why() string {
	if n.Kind == Instruction {
		return n.Tool + " reads it " + n.When
	}
	return n.Tool + " runs or loads it " + n.When
}

// Builtin is the list of persistence names, the one place that says which
// files in a workspace run later. A workspace may add names (policy
// [filesystem] protected); none of these can be removed. Git's own files
// (hooks, config, sequencer state, ...) are not names: they are found by
// what git takes for a repository (IsGitDir) and checked by the git rules.
func Builtin() []Name {
	const (
		onCd     = "when a shell enters the directory"
		onOpen   = "when the folder is opened"
		onStart  = "when an agent starts in the directory"
		onCommit = "when git runs a hook (commit, push, checkout)"
		onShell  = "when a shell or program starts with this as its home"
	)
	p := func(pattern, tool, when string) Name { return Name{pattern, Protect, tool, when} }
	i := func(pattern, tool string) Name {
		return Name{pattern, Instruction, tool, "as instructions at the start of a session"}
	}
	return []Name{
		// Version control that runs configured programs on any command.
		p(".gitmodules", "git submodule", "on submodule update (its URLs decide what is cloned and run)"),
		p(".hg/hgrc*", "Mercurial", "on every hg command (hooks, extensions)"),
		p(".hg/sharedpath", "Mercurial", "on every hg command (takes hgrc from the share source)"),
		p(".jj/repo/config.toml", "Jujutsu", "on every jj command (legacy repo config is migrated and loaded)"),
		p(".jj/repo/config-id", "Jujutsu", "on every jj command (without it the legacy config is loaded)"),
		p(".jj/workspace-config.toml", "Jujutsu", "on every jj command"),

		// Shell environment tools.
		p(".envrc", "direnv", onCd),
		p(".env.leave", "autoenv", "when a shell leaves the directory"),
		p(".autoenv.zsh", "zsh-autoenv", onCd),
		p(".autoenv_leave.zsh", "zsh-autoenv", "when a shell leaves the directory"),
		p(".rvmrc", "RVM", onCd),
		p(".tool-versions", "asdf and mise", "when a shimmed tool runs (a path: version runs programs from that directory)"),
		p("mise.toml", "mise", onCd+" (hooks, env scripts)"),
		p("mise.*.toml", "mise", onCd+" (hooks, env scripts)"),
		p(".mise.toml", "mise", onCd+" (hooks, env scripts)"),
		p(".mise.*.toml", "mise", onCd+" (hooks, env scripts)"),
		p(".mise", "mise", onCd+" (hooks, env scripts)"),
		p("mise/config*.toml", "mise", onCd+" (hooks, env scripts)"),
		p("mise/conf.d", "mise", onCd+" (hooks, env scripts)"),
		p(".config/mise", "mise", onCd+" (hooks, env scripts)"),
		p(".config/mise.toml", "mise", onCd+" (hooks, env scripts)"),
		p(".config/mise.*.toml", "mise", onCd+" (hooks, env scripts)"),
		p(".rtx.toml", "mise (rtx)", onCd),
		p(".rtx.*.toml", "mise (rtx)", onCd),

		// Shell and tool start-up files: a dotfiles repository is linked
		// into a home, so they run wherever they are in a workspace.
		p(".bashrc", "bash", onShell),
		p(".bash_profile", "bash", onShell),
		p(".bash_login", "bash", onShell),
		p(".bash_logout", "bash", "when a login shell exits"),
		p(".profile", "sh and bash", onShell),
		p(".zshrc", "zsh", onShell),
		p(".zshenv", "zsh", onShell),
		p(".zprofile", "zsh", onShell),
		p(".zlogin", "zsh", onShell),
		p(".zlogout", "zsh", "when a login shell exits"),
		p(".kshrc", "ksh", onShell),
		p(".mkshrc", "mksh", onShell),
		p(".cshrc", "csh and tcsh", onShell),
		p(".tcshrc", "tcsh", onShell),
		p(".login", "csh and tcsh", onShell),
		p(".logout", "csh and tcsh", "when a login shell exits"),
		p(".config/fish", "fish", onShell),
		p(".inputrc", "readline", onShell),
		p(".xprofile", "the X session", "at graphical login"),
		p(".xinitrc", "xinit", "at graphical login"),
		p(".xsession", "the X session", "at graphical login"),
		p(".xsessionrc", "the X session", "at graphical login"),
		p(".tmux.conf", "tmux", "when tmux starts (run-shell, hooks)"),
		p(".bash_aliases", "bash (sourced by .bashrc)", onShell),
		p(".config/tmux", "tmux", "when tmux starts (run-shell, hooks)"),
		p(".config/nvim", "Neovim", "when Neovim starts"),
		p(".vim", "Vim", "when Vim starts (plugins)"),
		p(".emacs", "Emacs", "when Emacs starts"),
		p(".emacs.d", "Emacs", "when Emacs starts"),
		p(".config/emacs", "Emacs", "when Emacs starts"),
		p(".config/autostart", "the desktop session", "at graphical login"),
		p(".direnvrc", "direnv", onCd+" (its own start-up file)"),
		p(".config/direnv", "direnv", onCd+" (direnvrc, lib)"),
		p(".hgrc", "Mercurial", "on every hg command (global config)"),
		p(".config/hg", "Mercurial", "on every hg command (global config)"),
		p(".jjconfig.toml", "Jujutsu", "on every jj command (global config)"),
		p(".config/jj", "Jujutsu", "on every jj command (global config)"),
		p(".gitconfig", "git", onShell+" (global config: fsmonitor, pager, aliases, hooksPath)"),
		p(".config/git", "git", onShell+" (global config and attributes)"),
		p(".ssh", "ssh and sshd", "on every ssh connection and login (config ProxyCommand, rc, authorized_keys)"),

		// Editors and IDEs.
		p(".vscode", "VS Code and its forks", onOpen+" (tasks run on folderOpen, settings name programs)"),
		p("*.code-workspace", "VS Code and its forks", onOpen+" (embedded tasks and settings)"),
		p(".devcontainer", "Dev Containers", "when the folder is reopened in a container (initializeCommand runs on the host)"),
		p(".devcontainer.json", "Dev Containers", "when the folder is reopened in a container (initializeCommand runs on the host)"),
		p(".idea", "JetBrains IDEs", onOpen+" (run configurations, startup tasks, build import)"),
		p(".fleet", "JetBrains Fleet", onOpen),
		p(".zed", "Zed", onOpen+" (language server binaries, context servers, tasks)"),
		p(".theia", "Theia", onOpen+" (tasks, settings)"),
		p("*.sublime-project", "Sublime Text", onOpen+" (language server commands)"),
		p(".nvim.lua", "Neovim (exrc)", onOpen),
		p(".nvimrc", "Neovim (exrc)", onOpen),
		p(".exrc", "Vim and Neovim (exrc)", onOpen),
		p(".vimrc", "Vim (exrc)", onOpen),
		p(".gvimrc", "gVim (exrc)", onOpen),
		p(".lvimrc", "the localvimrc plugin", onOpen),
		p(".lazy.lua", "lazy.nvim", onOpen),
		p(".dir-locals.el", "Emacs", "when a file in the directory is opened (eval variables)"),
		p(".dir-locals-2.el", "Emacs", "when a file in the directory is opened (eval variables)"),

		// AI coding agents: settings that start MCP servers, hooks,
		// plugins or helper commands.
		p(".claude", "Claude Code", onStart+" (hooks, MCP servers, helper commands)"),
		p(".mcp.json", "Claude Code", onStart+" (MCP servers)"),
		p(".codex", "Codex", onStart+" (MCP servers, hooks, notify)"),
		p(".agents", "Codex and others", onStart+" (skills)"),
		p(".pi", "pi", onStart+" (settings, extensions)"),
		p(".gemini", "Gemini CLI", onStart+" (MCP servers, hooks, commands, .env)"),
		p(".qwen", "Qwen Code", onStart+" (MCP servers, .env)"),
		p(".cursor", "Cursor", onStart+" (MCP servers, hooks)"),
		p(".github/hooks", "GitHub Copilot in VS Code", onStart+" (agent hooks)"),
		p(".github/agents", "GitHub Copilot in VS Code", onStart+" (custom agents with hooks)"),
		p(".continue", "Continue", onStart+" (MCP servers)"),
		p(".continuerc.json", "Continue", onStart),
		p(".clinerules/hooks", "Cline", onStart+" (hook programs)"),
		p(".roo", "Roo Code", onStart+" (MCP servers)"),
		p(".windsurf", "Windsurf", onStart+" (hooks)"),
		p(".kiro", "Kiro", onStart+" (hooks run shell commands, MCP servers)"),
		p(".junie", "Junie", onStart+" (MCP servers)"),
		p(".amazonq", "Amazon Q", onStart+" (agents with hooks, MCP servers)"),
		p(".factory", "Factory", onStart+" (hooks, MCP servers)"),
		p(".opencode", "opencode", onStart+" (plugins, MCP servers)"),
		p("opencode.json", "opencode", onStart+" (plugins, MCP servers)"),
		p("opencode.jsonc", "opencode", onStart+" (plugins, MCP servers)"),
		p("crush.json", "Crush", onStart+" (MCP servers)"),
		p(".crush.json", "Crush", onStart+" (MCP servers)"),
		p("crushrc", "Crush", onStart+" (a shell script)"),
		p(".crushrc", "Crush", onStart+" (a shell script)"),
		p(".aider.conf.yml", "Aider", onStart+" (lint-cmd runs after every edit)"),

		// Git hook managers: the installed hook reads these when it runs.
		p(".husky", "husky", onCommit),
		p(".huskyrc", "husky 4", onCommit),
		p(".huskyrc.*", "husky 4", onCommit),
		p("husky.config.*", "husky 4", onCommit),
		p(".pre-commit-config.yaml", "pre-commit", onCommit),
		p(".pre-commit-config.yml", "pre-commit", onCommit),
		p("lefthook.*", "lefthook", onCommit),
		p(".lefthook.*", "lefthook", onCommit),
		p("lefthook-local.*", "lefthook", onCommit),
		p(".lefthook-local.*", "lefthook", onCommit),
		p(".lefthook", "lefthook", onCommit),
		p(".lefthook-local", "lefthook", onCommit),
		p(".config/lefthook.*", "lefthook", onCommit),
		p(".config/lefthook-local.*", "lefthook", onCommit),
		p("hk.pkl", "hk", onCommit),
		p("hk.local.pkl", "hk", onCommit),
		p(".config/hk.pkl", "hk", onCommit),
		p(".config/hk.local.pkl", "hk", onCommit),
		p(".overcommit.yml", "overcommit", onCommit),
		p(".git-hooks", "overcommit", onCommit+" (plugins)"),
		p(".lintstagedrc", "lint-staged", onCommit),
		p(".lintstagedrc.*", "lint-staged", onCommit),
		p("lint-staged.config.*", "lint-staged", onCommit),
		p(".commitlintrc", "commitlint", onCommit),
		p(".commitlintrc.*", "commitlint", onCommit),
		p("commitlint.config.*", "commitlint", onCommit),

		// sandboxd's own.
		p(".sandboxd.toml", "sandboxd", "on the next run (workspace policy)"),
		p(".sandboxd", "sandboxd", "on the next run"),

		// Instructions: committed, and listed.
		i("AGENTS.md", "Codex, opencode, Cursor, Zed and others"),
		i("AGENTS.override.md", "Codex"),
		i("AGENT.md", "Amp and Zed"),
		i("CLAUDE.md", "Claude Code"),
		i("CLAUDE.local.md", "Claude Code"),
		i("GEMINI.md", "Gemini CLI"),
		i("QWEN.md", "Qwen Code"),
		i("CRUSH.md", "Crush"),
		i("crush.md", "Crush"),
		i("CRUSH.local.md", "Crush"),
		i("AmazonQ.md", "Amazon Q"),
		i(".rules", "Zed"),
		i(".cursorrules", "Cursor"),
		i(".windsurfrules", "Windsurf"),
		i(".clinerules", "Cline"),
		i(".roorules", "Roo Code"),
		i(".roomodes", "Roo Code"),
		i(".goosehints", "Goose"),
		i(".github/copilot-instructions.md", "GitHub Copilot"),
		i(".github/instructions", "GitHub Copilot"),
		i(".github/prompts", "GitHub Copilot"),
		// Read as variables by most tools, but sourced as shell code by
		// autoenv and oh-my-zsh's dotenv plugin on cd; refusing it would
		// break everyday work, so it is listed.
		{".env", Instruction, "autoenv and oh-my-zsh's dotenv plugin (source it); direnv, Aider", "when a shell enters the directory"},
	}
}

// PackageTrees are directories package managers fill with other people's
// files: a protected name inside one is committed and listed (refusing it
// would break installs), never reviewed.
func PackageTrees() []string {
	return []string{"node_modules", "bower_components", "vendor", "site-packages", "dist-packages"}
}

// Matcher finds names in paths. Build it once (NewMatcher) per run:
// matching is on every path a commit writes.
type Matcher struct {
	names   []Name
	byFirst map[string][]int // names whose first element is literal
	globs   []int            // names whose first element is a glob
	// prefixes index the leading parts of names of several parts by
	// their last part (globPrefixes: a glob last part).
	prefixes     map[string][]prefixKey
	globPrefixes []prefixKey
}

// NewMatcher indexes names.
func NewMatcher(names []Name) *Matcher {
	m := &Matcher{names: names, byFirst: map[string][]int{}, prefixes: map[string][]prefixKey{}}
	for k, n := range names {
		pat := strings.Split(n.Pattern, "/")
		for j := 1; j < len(pat); j++ {
			// A prefix of j parts ends at part j-1.
			if strings.ContainsAny(pat[j-1], `*?[\`) {
				m.globPrefixes = append(m.globPrefixes, prefixKey{k, j})
			} else {
				m.prefixes[pat[j-1]] = append(m.prefixes[pat[j-1]], prefixKey{k, j})
			}
		}
		first, _, _ := strings.Cut(n.Pattern, "/")
		if strings.ContainsAny(first, `*?[\`) {
			m.globs = append(m.globs, k)
		} else {
			m.byFirst[first] = append(m.byFirst[first], k)
		}
	}
	return m
}

// Names returns the names m matches.
func (m *Matcher) Names() []Name { return m.names }

// Starts reports whether a name may begin at an entry called elem: the
// cheap test a workspace scan makes of every entry.
func (m *Matcher) Starts(elem string) bool {
	if len(m.byFirst[elem]) > 0 {
		return true
	}
	for _, k := range m.globs {
		first, _, _ := strings.Cut(m.names[k].Pattern, "/")
		if ok, _ := path.Match(first, elem); ok {
			return true
		}
	}
	return false
}

// Match finds the name rel (workspace-relative, slash-separated) is at or
// below, at any depth; at is the index of rel's element where the name
// begins. The outermost match wins, and Protect wins over Instruction
// (".clinerules/hooks" inside the listed ".clinerules").
func (m *Matcher) Match(rel string) (n Name, at int, ok bool) {
	parts := strings.Split(rel, "/")
	best := -1
	for start := range parts {
		try := func(k int) {
			pat := strings.Split(m.names[k].Pattern, "/")
			if start+len(pat) > len(parts) || !matchAt(pat, parts[start:start+len(pat)]) {
				return
			}
			if best < 0 || (m.names[best].Kind != Protect && m.names[k].Kind == Protect) {
				best, at = k, start
			}
		}
		for _, k := range m.byFirst[parts[start]] {
			try(k)
		}
		for _, k := range m.globs {
			try(k)
		}
		if best >= 0 && m.names[best].Kind == Protect {
			break
		}
	}
	if best < 0 {
		return Name{}, 0, false
	}
	return m.names[best], at, true
}

// Prefix finds a name of several parts whose leading parts rel's last
// parts are ("x/.hg" for ".hg/hgrc*"); at is where the name begins in rel.
func (m *Matcher) Prefix(rel string) (n Name, at int, ok bool) {
	parts := strings.Split(rel, "/")
	last := parts[len(parts)-1]
	try := func(pk prefixKey) bool {
		pat := strings.Split(m.names[pk.name].Pattern, "/")
		return pk.k <= len(parts) && matchAt(pat[:pk.k], parts[len(parts)-pk.k:])
	}
	for _, pk := range m.prefixes[last] {
		if try(pk) {
			return m.names[pk.name], len(parts) - pk.k, true
		}
	}
	for _, pk := range m.globPrefixes {
		if try(pk) {
			return m.names[pk.name], len(parts) - pk.k, true
		}
	}
	return Name{}, 0, false
}

// prefixKey is a name of several parts and how many of its leading parts
// a prefix is.
type prefixKey struct{ name, k int }

func matchAt(pat, parts []string) bool {
	for i, p := range pat {
		if ok, err := path.Match(p, parts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// InPackageTree reports whether one of the first n elements of rel is a
// package-manager tree.
func InPackageTree(rel string, n int) (string, bool) {
	parts := strings.Split(rel, "/")
	for _, p := range parts[:min(n, len(parts))] {
		for _, t := range PackageTrees() {
			if p == t {
				return p, true
			}
		}
	}
	return "", false
}

// Names are the built-in names plus extra protected patterns (a
// workspace's [filesystem] protected).
// Patterns equal to a built-in one, and ".git" (git directories have
// rules of their own), add nothing.
func Names(extra []string) []Name {
	out := Builtin()
	have := map[string]bool{".git": true}
	for _, n := range out {
		have[n.Pattern] = true
	}
	for _, e := range extra {
		if !have[e] {
			have[e] = true
			out = append(out, Name{Pattern: e, Kind: Protect, Tool: "a program this workspace's policy names", When: "([filesystem] protected)"})
		}
	}
	return out
}
