package persist

import (
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/gitconfig"
	"github.com/sandboxd/sandboxd/pathtree"
)

// Outside the workspace nothing is committed or swept: a write there
// happens only when a reviewer allows it, and then it is real at once.
// Where the host runs or loads the result later without being asked (a
// shell's start-up file, a user service, a program on PATH, another
// repository's hooks), no reviewer may allow it: HostGuard says which
// paths those are, and the broker refuses them before any reviewer.
//
// The class, each part with its source:
//   - the start-up locations of the user's session, shells and services
//     (StartupTable: each entry names its tool, moment and source);
//   - every protected name of names.go, at any depth (a home is where a
//     dotfiles repository is linked in, and another project's .envrc or
//     .vscode runs when that project is opened) — agent instructions
//     excepted;
//   - git directories, whatever their name (IsGitDir), and everything
//     the caller's own git config names: its includes, core.hooksPath,
//     init.templateDir, and the programs its exec-capable settings name;
//   - directories on the caller's PATH, and those a login shell adds to
//     it once they exist (Debian's and Fedora's ~/.profile and ~/.bashrc:
//     ~/bin and ~/.local/bin), with whatever a symlink there points at;
//   - the files the caller's shell start-up files source.

// Startup is one start-up location.
type Startup struct {
	// Pattern is "~/..." (the caller's home), "$XDG_CONFIG_HOME/...",
	// "$XDG_DATA_HOME/..." or absolute; "*" and "?" match within one
	// element, "**" any number of them. A change at or below a match is
	// refused.
	Pattern string
	// Tool and When say what runs it, and when.
	Tool, When string
	// Source is where the tool documents it.
	Source string
}

// StartupTable is the list of start-up locations of a user's session,
// shells and services outside the names of names.go.
func StartupTable() []Startup {
	const (
		login   = "at every login"
		session = "when the graphical session starts"
	)
	return []Startup{
		// Shells beyond the names table (which holds .bashrc, .profile,
		// .zshrc, .config/fish, ...).
		{"~/.bashrc.d", "bash (Fedora's ~/.bashrc sources every file in it)", "in every interactive shell", "https://src.fedoraproject.org/rpms/bash/blob/rawhide/f/dot-bashrc"},
		{"$XDG_CONFIG_HOME/nushell", "nushell (config.nu, env.nu, login.nu, autoload)", "in every nushell", "https://www.nushell.sh/book/configuration.html"},
		{"~/.xonshrc", "xonsh", "in every xonsh", "https://xon.sh/xonshrc.html"},
		{"$XDG_CONFIG_HOME/xonsh", "xonsh (rc.xsh, rc.d)", "in every xonsh", "https://xon.sh/xonshrc.html"},
		{"$XDG_CONFIG_HOME/elvish", "elvish (rc.elv)", "in every elvish", "https://elv.sh/ref/command.html#rc-file"},
		{"~/.elvish", "elvish (rc.elv, the legacy place)", "in every elvish", "https://elv.sh/ref/command.html#rc-file"},
		{"$XDG_DATA_HOME/elvish", "elvish (lib)", "in every elvish that uses it", "https://elv.sh/ref/runtime.html"},
		{"~/.oh-my-zsh", "oh-my-zsh (sourced from ~/.zshrc: plugins, custom/)", "in every zsh", "https://github.com/ohmyzsh/ohmyzsh/blob/master/oh-my-zsh.sh"},
		{"~/.*.zwc", "zsh (a compiled start-up file, loaded instead of its source, even when the source does not exist)", "in every zsh", "zsh Src/parse.c try_source_file"},
		{"~/.zcompdump*", "zsh compinit (sourced)", "in every zsh whose .zshrc runs compinit", "zsh Completion/compinit"},
		{"~/.bash_completion", "bash-completion (sourced from Debian's ~/.bashrc)", "in every interactive bash", "scop/bash-completion bash_completion"},
		{"$XDG_DATA_HOME/bash-completion", "bash-completion (completions sourced on TAB)", "when a command is completed", "scop/bash-completion bash_completion"},
		{"$XDG_DATA_HOME/fish", "fish (vendor_conf.d, vendor_functions.d)", "in every fish", "fish share/config.fish"},
		{"$XDG_CONFIG_HOME/fish", "fish (config.fish, conf.d, functions, fish_variables)", "in every fish", "fish share/config.fish"},
		{"$XDG_CONFIG_HOME/direnv", "direnv (direnvrc, lib, and direnv.toml's whitelist, which trusts .envrc files)", "whenever a shell enters a directory", "direnv stdlib.sh; direnv.toml(1)"},
		{"$XDG_DATA_HOME/direnv", "direnv (allow records: each trusts one .envrc)", "whenever a shell enters a directory", "direnv(1): direnv allow"},
		{"$XDG_CONFIG_HOME/mise", "mise (hooks, env, tasks; trusted_config_paths)", "whenever a shell enters a directory", "https://mise.jdx.dev/hooks.html"},
		{"$XDG_CONFIG_HOME/user-dirs.dirs", "xdg-user-dir (sources it as shell)", "whenever a script asks for a user directory", "xdg-user-dirs /usr/bin/xdg-user-dir"},
		{"~/.lessfilter", "lesspipe (runs it)", "for every file opened with less", "less /usr/bin/lesspipe"},
		{"$XDG_CONFIG_HOME/lessfilter", "lesspipe (runs it)", "for every file opened with less", "less /usr/bin/lesspipe"},
		{"~/.wgetrc", "wget (use_askpass runs a program)", "on every download", "wget(1): use_askpass"},
		{"~/.xinputrc", "im-config (sourced)", "when the graphical session starts", "im-config /etc/X11/Xsession.d/70im-config_launch"},
		{"~/.Xsession", "Debian's Xsession", "when the graphical session starts", "x11-common /etc/X11/Xsession.d/50x11-common_determine-startup"},
		{"~/.sway", "sway (exec lines)", "when the graphical session starts", "sway(5)"},

		// The user's services and session.
		{"$XDG_CONFIG_HOME/systemd", "systemd --user (units, user.conf.d, environment generators)", "at login, and when a unit's timer, socket or path fires", "systemd.unit(5), user@.service"},
		{"$XDG_DATA_HOME/systemd", "systemd --user (units)", "at login", "systemd.unit(5): unit load path"},
		{"$XDG_CONFIG_HOME/user-tmpfiles.d", "systemd-tmpfiles --user (creates, writes and links files as you)", "at login", "tmpfiles.d(5)"},
		{"$XDG_DATA_HOME/user-tmpfiles.d", "systemd-tmpfiles --user", "at login", "tmpfiles.d(5)"},
		{"$XDG_CONFIG_HOME/environment.d", "systemd --user (every service's and the session's environment: PATH, LD_PRELOAD)", login, "environment.d(5)"},
		{"~/.pam_environment", "pam_env (the session's environment)", login, "pam_env.conf(5): user_readenv"},
		{"$XDG_CONFIG_HOME/autostart", "XDG autostart (desktop entries)", session, "https://specifications.freedesktop.org/autostart-spec/latest/"},
		{"$XDG_CONFIG_HOME/autostart-scripts", "KDE Plasma 5", session, "https://userbase.kde.org/System_Settings/Autostart"},
		{"$XDG_CONFIG_HOME/plasma-workspace", "KDE Plasma (env/ and shutdown/ scripts)", session + " and ends", "https://userbase.kde.org/Session_Environment_Variables"},
		{"~/.kde/Autostart", "KDE 4", session, "KDE 4 kstartupconfig"},
		{"~/.xprofile", "display managers (GDM, LightDM, SDDM)", session, "https://wiki.archlinux.org/title/Xprofile"},
		{"~/.xsession", "Xsession", session, "Xsession(5)"},
		{"~/.xsessionrc", "Debian's Xsession", session, "Xsession(5)"},
		{"~/.xinitrc", "xinit and startx", session, "xinit(1)"},
		{"~/.xserverrc", "xinit and startx", session, "xinit(1)"},
		{"~/.Xclients", "Red Hat's Xclients", session, "/etc/X11/xinit/Xclients"},
		{"$XDG_CONFIG_HOME/openbox/autostart", "Openbox", session, "openbox-session(1)"},
		{"$XDG_CONFIG_HOME/labwc/autostart", "labwc", session, "labwc-config(5)"},
		{"$XDG_CONFIG_HOME/i3", "i3 (exec lines)", session, "https://i3wm.org/docs/userguide.html#exec"},
		{"~/.i3", "i3 (exec lines)", session, "https://i3wm.org/docs/userguide.html#configuring"},
		{"$XDG_CONFIG_HOME/sway", "sway (exec lines)", session, "sway(5)"},
		{"$XDG_CONFIG_HOME/hypr", "Hyprland (exec-once)", session, "https://wiki.hypr.land/Configuring/Keywords/#executing"},
		{"$XDG_CONFIG_HOME/river", "river (init is run)", session, "river(1)"},
		{"$XDG_CONFIG_HOME/lxsession", "LXDE (autostart)", session, "lxsession(1)"},
		{"$XDG_CONFIG_HOME/awesome", "awesome (rc.lua)", session, "awesome(1)"},
		{"$XDG_DATA_HOME/dbus-1/services", "D-Bus session bus (service activation: Exec=)", "when any program calls that bus name", "dbus-daemon(1): <servicedir>"},
		{"$XDG_DATA_HOME/applications", "desktop launchers and file associations", "when a program or a file of a type is opened", "https://specifications.freedesktop.org/desktop-entry-spec/latest/"},
		{"$XDG_CONFIG_HOME/mimeapps.list", "xdg-open and desktops (default applications)", "when a file or URL is opened", "https://specifications.freedesktop.org/mime-apps-spec/latest/"},

		// Interpreters' start-up hooks.
		{"~/.local/lib/python*/site-packages", "Python (your user site: .pth files run at every start, and its modules come before the system's)", "at every start of that Python, and whenever a module there shadows a system one", "https://docs.python.org/3/library/site.html"},
		{"~/**/site-packages/*.pth", "Python (site.py runs import lines of .pth files)", "at every start of an interpreter or virtual environment kept there", "https://docs.python.org/3/library/site.html"},
		{"~/**/site-packages/sitecustomize.py", "Python (site.py imports it)", "at every start of an interpreter kept there", "https://docs.python.org/3/library/site.html"},
		{"~/**/site-packages/usercustomize.py", "Python (site.py imports it)", "at every start of an interpreter kept there", "https://docs.python.org/3/library/site.html"},
		{"~/**/dist-packages/*.pth", "Debian's Python (site.py)", "at every start of an interpreter kept there", "https://docs.python.org/3/library/site.html"},

		// Tools' home configuration that names programs they run on any
		// invocation (the names table holds the rest: .gitconfig,
		// .config/git, .hgrc, .npmrc, .cargo/config.toml, ...).
		{"$XDG_CONFIG_HOME/go/env", "go (go env -w: GOFLAGS=-toolexec, CC, GOTOOLCHAIN)", "on every go command", "https://go.dev/ref/mod#go-env-w"},
		{"$XDG_CONFIG_HOME/pip", "pip (pip.conf)", "on every pip command", "https://pip.pypa.io/en/stable/topics/configuration/"},
		{"~/.pip", "pip (pip.conf, the legacy place)", "on every pip command", "https://pip.pypa.io/en/stable/topics/configuration/"},
		{"~/.gemrc", "RubyGems (gem and bundler options)", "on every gem command", "https://guides.rubygems.org/command-reference/#gem-environment"},
		{"~/.m2/extensions.xml", "Maven", "on every mvn command", "https://maven.apache.org/configure.html"},
		{"~/.mavenrc", "Maven's mvn script (sourced)", "on every mvn command", "https://maven.apache.org/configure.html"},
		{"~/.gradle/init.d", "Gradle (init scripts)", "on every gradle build", "https://docs.gradle.org/current/userguide/init_scripts.html"},
		{"~/.gradle/init.gradle", "Gradle (init script)", "on every gradle build", "https://docs.gradle.org/current/userguide/init_scripts.html"},
		{"~/.gradle/init.gradle.kts", "Gradle (init script)", "on every gradle build", "https://docs.gradle.org/current/userguide/init_scripts.html"},
		{"~/.gradle/gradle.properties", "Gradle (org.gradle.java.home, jvmargs)", "on every gradle build", "https://docs.gradle.org/current/userguide/build_environment.html"},
		{"~/.sbt", "sbt (global plugins and settings)", "on every sbt build", "https://www.scala-sbt.org/1.x/docs/Global-Settings.html"},
		{"~/.config/yarn", "Yarn 1 (global .yarnrc)", "on every yarn command", "https://classic.yarnpkg.com/en/docs/yarnrc"},
		{"~/.yarnrc", "Yarn 1", "on every yarn command", "https://classic.yarnpkg.com/en/docs/yarnrc"},
		{"~/.bunfig.toml", "Bun (preload)", "on every bun run", "https://bun.com/docs/runtime/bunfig"},
		{"$XDG_CONFIG_HOME/.bunfig.toml", "Bun (preload)", "on every bun run", "https://bun.com/docs/runtime/bunfig"},
		{"~/.gdbinit", "gdb", "when gdb starts", "gdb: Startup"},
		{"$XDG_CONFIG_HOME/gdb", "gdb (gdbinit)", "when gdb starts", "gdb: Startup"},
		{"~/.lldbinit", "lldb", "when lldb starts", "https://lldb.llvm.org/man/lldb.html#configuration-files"},
		{"~/.pdbrc", "pdb", "when the Python debugger starts", "https://docs.python.org/3/library/pdb.html"},
		{"~/.irbrc", "irb", "when irb starts", "irb: lib/irb/init.rb rc_files"},
		{"$XDG_CONFIG_HOME/irb", "irb (irbrc)", "when irb starts", "irb: lib/irb/init.rb rc_files"},
		{"~/.pryrc", "pry", "when pry starts", "https://github.com/pry/pry/wiki/Pry-rc"},
		{"~/.rdbgrc", "Ruby's debug gem", "when rdbg starts", "https://github.com/ruby/debug#configuration"},
		{"~/.perldb", "the Perl debugger", "when perl -d starts", "perldebug(1)"},
		{"~/.ipython", "IPython (startup/ and profile config)", "when IPython starts", "https://ipython.readthedocs.io/en/stable/interactive/tutorial.html#startup-files"},
		{"~/.jupyter", "Jupyter (config files)", "when Jupyter starts", "https://docs.jupyter.org/en/latest/use/config.html"},
		{"~/.pythonrc", "the Python REPL (when PYTHONSTARTUP names it)", "when the Python REPL starts", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONSTARTUP"},
		{"~/.screenrc", "GNU screen", "when screen starts", "screen(1)"},
		{"~/.lesskey", "less (its #env section sets LESSOPEN, which runs a program)", "for every file less opens, git's pager included", "lesskey(1)"},
		{"$XDG_CONFIG_HOME/lesskey", "less (its #env section sets LESSOPEN, which runs a program)", "for every file less opens, git's pager included", "lesskey(1)"},
		{"~/.sqliterc", "sqlite3 (.system and .shell lines)", "when sqlite3 starts", "https://sqlite.org/cli.html"},
		{"$XDG_CONFIG_HOME/sqlite3", "sqlite3 (sqliterc)", "when sqlite3 starts", "https://sqlite.org/cli.html"},
		{"~/.psqlrc", "psql (\\! runs a shell command)", "when psql starts", "psql(1)"},
		{"$XDG_CONFIG_HOME/psql", "psql", "when psql starts", "psql(1)"},
		{"~/.duckdbrc", "duckdb", "when duckdb starts", "https://duckdb.org/docs/api/cli/overview"},
		{"~/.mailcap", "mailcap (viewers)", "when a file of a type is opened", "mailcap(5)"},
		{"~/.asdfrc", "asdf", "on every shimmed command", "https://asdf-vm.com/manage/configuration.html"},
		{"~/.cargo/env", "rustup (sourced from ~/.profile and ~/.bashrc)", "in every login shell", "https://rust-lang.github.io/rustup/installation/index.html"},
		{"~/.gem/ruby/*/gems/*/lib/rubygems_plugin.rb", "RubyGems (plugins)", "on every gem command", "https://guides.rubygems.org/plugins/"},
		{"~/.node_modules", "Node.js (a global folder require searches)", "when a require misses", "https://nodejs.org/api/modules.html#loading-from-the-global-folders"},
		{"~/.node_libraries", "Node.js (a global folder require searches)", "when a require misses", "https://nodejs.org/api/modules.html#loading-from-the-global-folders"},

		// Version managers: trees of programs run through shims and
		// scripts sourced from the shell's start-up files.
		{"~/.nvm", "nvm (nvm.sh sourced from ~/.bashrc; node versions)", "in every interactive shell", "https://github.com/nvm-sh/nvm#install--update-script"},
		{"~/.pyenv", "pyenv (shims, pyenv.d hooks sourced on every shim run, versions)", "on every python or pip", "pyenv libexec/pyenv-exec"},
		{"~/.rbenv", "rbenv (shims, hooks, versions)", "on every ruby", "https://github.com/rbenv/rbenv#how-it-works"},
		{"~/.nodenv", "nodenv (shims, versions)", "on every node", "https://github.com/nodenv/nodenv"},
		{"~/.goenv", "goenv (shims, versions)", "on every go", "https://github.com/go-nv/goenv"},
		{"~/.jenv", "jenv (shims, versions)", "on every java", "https://github.com/jenv/jenv"},
		{"~/.asdf", "asdf (shims, plugins' exec-env)", "on every shimmed command", "https://asdf-vm.com/manage/configuration.html"},
		{"$XDG_DATA_HOME/mise", "mise (shims, installs)", "on every shimmed command", "https://mise.jdx.dev/dev-tools/shims.html"},
		{"~/.rustup", "rustup (toolchains the rustc and cargo proxies run)", "on every cargo or rustc", "https://rust-lang.github.io/rustup/concepts/toolchains.html"},
		{"~/.volta", "Volta (shims, tools)", "on every node", "https://docs.volta.sh"},
		{"~/.sdkman", "SDKMAN! (sourced from ~/.bashrc; candidates)", "in every interactive shell", "https://sdkman.io/install"},
		{"~/.rvm", "RVM (sourced from ~/.bashrc; rubies)", "in every interactive shell", "https://rvm.io/rvm/install"},
		{"$XDG_DATA_HOME/fnm", "fnm (node versions)", "on every node", "https://github.com/Schniz/fnm"},
		{"~/.bun/bin", "Bun (on PATH by its installer)", "on every bun", "https://bun.com/docs/installation"},
		{"~/.deno/bin", "Deno (on PATH by its installer)", "on every deno", "https://docs.deno.com/runtime/getting_started/installation/"},

		// Editors' and agents' home folders not in the names table.
		{"~/.vscode/extensions", "VS Code (extensions)", "when VS Code starts", "https://code.visualstudio.com/docs/editor/extension-marketplace#_where-are-extensions-installed"},
		{"~/.vscode-server", "VS Code server (extensions)", "when VS Code connects", "https://code.visualstudio.com/docs/remote/troubleshooting"},
		{"~/.cursor", "Cursor (extensions, MCP servers)", "when Cursor starts", "https://docs.cursor.com/context/model-context-protocol"},
		{"~/.windsurf", "Windsurf (extensions)", "when Windsurf starts", "https://docs.windsurf.com"},
		{"$XDG_CONFIG_HOME/Code/User", "VS Code (settings naming programs, tasks)", "when VS Code starts", "https://code.visualstudio.com/docs/getstarted/settings"},
		{"$XDG_CONFIG_HOME/opencode", "opencode (plugins, MCP servers)", "when opencode starts", "https://opencode.ai/docs/config/"},
		{"$XDG_CONFIG_HOME/crush", "Crush (MCP servers)", "when Crush starts", "https://github.com/charmbracelet/crush"},
		{"$XDG_CONFIG_HOME/helix", "Helix (language servers)", "when Helix starts", "https://docs.helix-editor.com/languages.html"},
		{"$XDG_CONFIG_HOME/zed", "Zed (language servers, tasks, MCP servers)", "when Zed starts", "https://zed.dev/docs/configuring-zed"},
		{"$XDG_CONFIG_HOME/JetBrains", "JetBrains IDEs (plugins, tools)", "when the IDE starts", "https://www.jetbrains.com/help/idea/directories-used-by-the-ide-to-store-settings-caches-plugins-and-logs.html"},
		{"$XDG_DATA_HOME/JetBrains", "JetBrains IDEs (plugins)", "when the IDE starts", "https://www.jetbrains.com/help/idea/directories-used-by-the-ide-to-store-settings-caches-plugins-and-logs.html"},
		{"$XDG_DATA_HOME/nvim/site", "Neovim (plugins on its runtimepath)", "when Neovim starts", "nvim :help runtimepath"},
		{"$XDG_CONFIG_HOME/nvim", "Neovim (init.lua, plugins)", "when Neovim starts", "nvim :help init.lua"},
		{"$XDG_CONFIG_HOME/vim", "Vim 9.1 (vimrc)", "when Vim starts", "vim :help vimrc"},
		{"$XDG_CONFIG_HOME/emacs", "Emacs (init.el)", "when Emacs starts", "GNU Emacs manual: Find Init"},
		{"$XDG_CONFIG_HOME/tmux", "tmux (run-shell, hooks)", "when tmux starts", "tmux(1)"},
		{"$XDG_CONFIG_HOME/git", "git (config, attributes)", "on every git command", "git-config(1): FILES"},
		{"$XDG_CONFIG_HOME/hg", "Mercurial (hgrc)", "on every hg command", "hgrc(5)"},
		{"$XDG_CONFIG_HOME/jj", "Jujutsu (config)", "on every jj command", "https://jj-vcs.github.io/jj/latest/config/"},
		{"$XDG_CONFIG_HOME/github-copilot", "GitHub Copilot CLI (MCP servers)", "when Copilot starts", "https://docs.github.com/en/copilot"},
		{"~/.copilot", "GitHub Copilot CLI (config, MCP servers)", "when Copilot starts", "https://docs.github.com/en/copilot"},
	}
}

// HostConfig describes the caller for a HostGuard.
type HostConfig struct {
	// Home, ConfigHome and DataHome are the caller's home and
	// XDG_CONFIG_HOME and XDG_DATA_HOME (or their defaults).
	Home, ConfigHome, DataHome string
	// Workspace is the run's workspace: its own rules are the commit's.
	Workspace string
	// Path is the caller's PATH.
	Path []string
	// GitConfigs are the caller's own git config files (system, global,
	// XDG).
	GitConfigs []string
	// Names are the persistence names.
	Names *Matcher
	// FS reads the host (nil: Host).
	FS FS
}

// HostGuard says which paths outside the workspace are start-up
// locations. It is safe for concurrent use.
type HostGuard struct {
	cfg      HostConfig
	patterns []hostPattern
	// dirs are directories any entry of which is a start-up location
	// (PATH directories); files are single start-up paths (what the
	// caller's git and shell configuration name).
	dirs, files map[string]string

	linksOnce sync.Once
	links     map[string]string // what symlinks in PATH directories point at
}

type hostPattern struct {
	parts []string
	why   string
}

// NewHostGuard reads what it needs of the caller's configuration (git
// config, shell start-up files) once.
func NewHostGuard(cfg HostConfig) *HostGuard {
	if cfg.FS == nil {
		cfg.FS = Host{}
	}
	g := &HostGuard{cfg: cfg, dirs: map[string]string{}, files: map[string]string{}}
	// One look at the tree for the whole construction: every table
	// entry under the home spells the same few directories.
	spell := &spellings{real: NewRealpaths(), memo: map[string][]string{}}
	for _, s := range StartupTable() {
		for _, p := range expandStartup(s.Pattern, cfg, spell) {
			g.patterns = append(g.patterns, hostPattern{strings.Split(strings.Trim(p, "/"), "/"), s.Tool + " runs or loads it " + s.When})
		}
	}
	const onPath = "a directory on your PATH (or one a login shell adds once it exists): a program there runs in place of the one you name"
	for _, d := range append(append([]string(nil), cfg.Path...), "~/bin", "~/.local/bin") {
		if d == "~" || strings.HasPrefix(d, "~/") {
			// The shell expands a leading ~ in PATH when it looks up a
			// command.
			if cfg.Home == "" {
				continue
			}
			d = cfg.Home + d[1:]
		}
		if !filepath.IsAbs(d) {
			continue // "" and relative entries mean the working directory
		}
		for _, v := range spell.of(filepath.Clean(d)) {
			g.dirs[v] = onPath
		}
	}
	g.gitNamed()
	g.shellSourced()
	return g
}

// spellings answers of, for one look at the tree (Realpaths), each
// path's once.
type spellings struct {
	real *Realpaths
	memo map[string][]string
}

// of are p and p with the symlinks on its way resolved (as far as it
// exists): a location is guarded under both names. The slice is shared:
// read only.
func (s *spellings) of(p string) []string {
	if out, ok := s.memo[p]; ok {
		return out
	}
	out := []string{p}
	existing, rest := p, ""
	for existing != "/" {
		if r, err := s.real.Eval(existing); err == nil {
			if q := filepath.Join(r, rest); q != p {
				out = append(out, q)
			}
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = filepath.Dir(existing)
	}
	s.memo[p] = out
	return out
}

// expandStartup makes a table pattern absolute, under every spelling of
// its directory: the home as given and resolved, and for the XDG
// directories both the caller's setting and the default under the home
// (systemd and the desktop session read the default whatever a shell's
// XDG_CONFIG_HOME says). None when the caller has no home.
func expandStartup(p string, cfg HostConfig, spell *spellings) []string {
	var bases []string
	rest := ""
	switch {
	case strings.HasPrefix(p, "~/"):
		bases, rest = []string{cfg.Home}, p[2:]
	case strings.HasPrefix(p, "$XDG_CONFIG_HOME/"):
		bases, rest = []string{cfg.ConfigHome, filepath.Join(cfg.Home, ".config")}, strings.TrimPrefix(p, "$XDG_CONFIG_HOME/")
	case strings.HasPrefix(p, "$XDG_DATA_HOME/"):
		bases, rest = []string{cfg.DataHome, filepath.Join(cfg.Home, ".local", "share")}, strings.TrimPrefix(p, "$XDG_DATA_HOME/")
	default:
		return []string{p}
	}
	if cfg.Home == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, b := range bases {
		if b == "" || !filepath.IsAbs(b) {
			continue
		}
		for _, v := range spell.of(filepath.Clean(b)) {
			if q := filepath.Join(v, rest); !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	return out
}

// Startup implements the broker's StartupLocations: why a change at p
// (absolute, clean) would run later, or ok false. Paths in the workspace
// are the commit's to judge.
func (g *HostGuard) Startup(p string) (string, bool) {
	if pathtree.Within(g.cfg.Workspace, p) {
		return "", false
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for _, hp := range g.patterns {
		if matchPrefix(hp.parts, parts) {
			return hp.why, true
		}
	}
	if g.cfg.Names != nil {
		if n, at, ok := g.cfg.Names.Match(strings.Trim(p, "/")); ok && n.Kind != Instruction {
			if _, inTree := InPackageTree(strings.Trim(p, "/"), at); !inTree {
				return n.Pattern + " is a persistence path: " + n.Why(), true
			}
		}
	}
	for d := p; ; d = filepath.Dir(d) {
		if why, ok := g.files[d]; ok {
			return why, true
		}
		if filepath.Base(d) == ".git" || (d != p && IsGitDir(g.cfg.FS, d) != NotGitDir) {
			return d + " is a git directory: git runs its hooks and config in that repository", true
		}
		if d != p {
			if hooks := g.repoHooks(d); pathtree.Within(hooks, p) {
				return hooks + " is the core.hooksPath of the repository at " + d + ": git runs the hooks there", true
			}
		}
		if d == "/" {
			break
		}
	}
	if why, ok := g.dirs[p]; ok {
		return why, true
	}
	if why, ok := g.dirs[filepath.Dir(p)]; ok {
		return why, true
	}
	g.linksOnce.Do(g.readLinks)
	if why, ok := g.links[p]; ok {
		return why, true
	}
	return "", false
}

// repoHooks is the core.hooksPath of the repository whose work tree is
// dir, resolved as git does ("" when dir holds none, or it sets none).
func (g *HostGuard) repoHooks(dir string) string {
	if _, err := g.cfg.FS.Lstat(dir + "/.git"); err != nil {
		return ""
	}
	d, v := Discover(g.cfg.FS, dir)
	if v != GitDir || d.GitDir == "" {
		return ""
	}
	hooks := ""
	for _, f := range []string{d.GitDir + "/config", d.GitDir + "/config.worktree"} {
		b, err := readFollow(g.cfg.FS, f, gitconfig.MaxSize)
		if err != nil {
			continue
		}
		ents, _ := gitconfig.Parse(b)
		for _, e := range ents {
			if e.Section == "core" && e.Key == "hookspath" && e.Value != "" {
				hooks = e.Value
			}
		}
	}
	switch {
	case hooks == "":
		return ""
	case strings.HasPrefix(hooks, "~/") && g.cfg.Home != "":
		return filepath.Clean(g.cfg.Home + hooks[1:])
	case filepath.IsAbs(hooks):
		return filepath.Clean(hooks)
	}
	return filepath.Join(dir, hooks)
}

// matchPrefix reports whether pat matches parts or a leading part of
// them ("**" matches any number of elements).
func matchPrefix(pat, parts []string) bool {
	if len(pat) == 0 {
		return true
	}
	if pat[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if matchPrefix(pat[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	if ok, err := path.Match(pat[0], parts[0]); err != nil || !ok {
		return false
	}
	return matchPrefix(pat[1:], parts[1:])
}

// readLinks finds what the symlinks in PATH directories point at: a
// program run by that name. One look at the tree (Realpaths): a
// directory that is another's spelling (/bin and /usr/bin) is read once,
// under its first name, and the directories the links point into
// (/etc/alternatives, /usr/lib/...) are looked at once, not once per link
// into them.
func (g *HostGuard) readLinks() {
	g.links = map[string]string{}
	dirs := make([]string, 0, len(g.dirs))
	for d := range g.dirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	real := NewRealpaths()
	read := map[string]bool{}
	for _, d := range dirs {
		rd, err := real.Eval(d)
		if err != nil {
			rd = d // read as it is named: os.ReadDir decides
		} else if read[rd] {
			continue // the same entries, their targets taken already
		}
		read[rd] = true
		ents, err := os.ReadDir(rd)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			t, err := real.Eval(filepath.Join(rd, e.Name()))
			if err != nil {
				continue
			}
			if _, ok := g.links[t]; !ok {
				g.links[t] = filepath.Join(d, e.Name()) + " on your PATH runs it"
			}
		}
	}
}

// gitNamed adds what the caller's own git config names: included files,
// core.hooksPath and init.templateDir (any entry below them), and the
// programs its exec-capable settings name by path.
func (g *HostGuard) gitNamed() {
	seen := map[string]bool{}
	var read func(f string, depth int)
	read = func(f string, depth int) {
		if depth > maxIncludeDepth || seen[f] {
			return
		}
		seen[f] = true
		b, err := readFollow(g.cfg.FS, f, gitconfig.MaxSize)
		if err != nil {
			return
		}
		ents, err := gitconfig.Parse(b)
		if err != nil {
			return
		}
		for _, e := range ents {
			switch {
			case (e.Section == "include" || e.Section == "includeif") && e.Key == "path" && e.Value != "":
				p := g.gitPath(e.Value, filepath.Dir(f))
				if p != "" {
					g.files[p] = "your git config includes it: git reads it on every command"
					read(p, depth+1)
				}
			case e.Section == "core" && e.Key == "hookspath" && e.Value != "":
				if p := g.gitPath(e.Value, ""); p != "" {
					g.files[p] = "your git config's core.hooksPath: git runs the hooks there in every repository"
				}
			case e.Section == "init" && e.Key == "templatedir" && e.Value != "":
				if p := g.gitPath(e.Value, ""); p != "" {
					g.files[p] = "your git config's init.templateDir: git copies its hooks into every new repository"
				}
			default:
				if _, capable := gitconfig.ExecCapable(e); capable {
					if prog := firstWord(e.Value); prog != "" {
						if p := g.gitPath(prog, ""); p != "" {
							g.files[p] = "a program your git config runs (" + e.Section + "." + e.Key + ")"
						}
					}
				}
			}
		}
	}
	for _, f := range g.cfg.GitConfigs {
		g.files[f] = "your git config: git reads it on every command (hooks, pager, fsmonitor, aliases)"
		read(f, 0)
	}
}

// gitPath makes a path from git config absolute ("~/" is the home,
// relative ones are relative to base); "" when it is neither.
func (g *HostGuard) gitPath(v, base string) string {
	switch {
	case strings.HasPrefix(v, "~/") && g.cfg.Home != "":
		return filepath.Join(g.cfg.Home, v[2:])
	case filepath.IsAbs(v):
		return filepath.Clean(v)
	case base != "" && !strings.Contains(v, ":"):
		return filepath.Join(base, v)
	}
	return ""
}

// firstWord is the program a shell-command value starts with, when it is
// a path ("" otherwise).
func firstWord(v string) string {
	v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "!"))
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	w := strings.Trim(f[0], `"'`)
	if strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~/") {
		return w
	}
	return ""
}

// shellSourced adds the files the caller's shell start-up files source
// by a path the file spells out ("source ~/.nvm/nvm.sh", ". "$HOME/x"",
// through variables the same file sets to such a path).
func (g *HostGuard) shellSourced() {
	if g.cfg.Home == "" {
		return
	}
	for _, rc := range []string{".profile", ".bash_profile", ".bash_login", ".bashrc", ".bash_aliases", ".zshenv", ".zprofile", ".zshrc", ".zlogin", ".kshrc", ".mkshrc"} {
		b, err := readFollow(g.cfg.FS, filepath.Join(g.cfg.Home, rc), 1<<20)
		if err != nil {
			continue
		}
		for _, p := range sourcedPaths(string(b), g.cfg.Home) {
			if _, ok := g.files[p]; !ok {
				g.files[p] = "~/" + rc + " sources it: every shell runs it"
			}
		}
	}
}

// sourcedPaths finds the absolute paths a shell start-up file sources
// ("source X", ". X"), expanding ~, $HOME, ${HOME} and variables the file
// assigns a literal path to before.
func sourcedPaths(text, home string) []string {
	vars := map[string]string{"HOME": home}
	expand := func(w string) string {
		w = strings.Trim(w, `"'`)
		if strings.HasPrefix(w, "~/") {
			w = home + w[1:]
		}
		return os.Expand(w, func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return "\x00" // unknown: not a path sandboxd can name
		})
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, stmt := range strings.FieldsFunc(line, func(r rune) bool { return r == ';' || r == '&' || r == '|' }) {
			f := strings.Fields(stmt)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if k, v, ok := strings.Cut(strings.TrimPrefix(f[0], "export "), "="); ok && len(f) == 1 && k != "" && !strings.ContainsAny(k, "$`") {
				if x := expand(v); strings.HasPrefix(x, "/") && !strings.Contains(x, "\x00") {
					vars[k] = x
				}
				continue
			}
			if f[0] == "export" && len(f) == 2 {
				if k, v, ok := strings.Cut(f[1], "="); ok {
					if x := expand(v); strings.HasPrefix(x, "/") && !strings.Contains(x, "\x00") {
						vars[k] = x
					}
				}
				continue
			}
			for i, w := range f {
				if (w == "source" || w == "." || w == `\.`) && i+1 < len(f) {
					if x := expand(f[i+1]); strings.HasPrefix(x, "/") && !strings.Contains(x, "\x00") && !strings.ContainsAny(x, "*?[") {
						out = append(out, filepath.Clean(x))
					}
				}
			}
		}
	}
	return out
}
