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
	// Settings: a configuration file that mixes ordinary settings with
	// ones naming a program, shell, interpreter, toolchain, preload or
	// start-up script the tool runs (Name.Settings reads them). A change
	// is refused when it adds or changes one of those, as a change to
	// git's own config is; any other change is committed.
	Settings
	// Hooked: a git hook manager's configuration. Nothing runs it but a
	// hook, so a change is refused only in a repository that runs hooks
	// (one installed, or a core.hooksPath or hook.* setting, before or
	// after the run); elsewhere it is committed and listed: installing
	// a hook is a change to git's own files, which stays refused.
	Hooked
	// Asked: the tool asks the person before it runs anything the file
	// names (a prompt that shows what it will do, every time the file is
	// new to it). Committed and listed.
	Asked
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
	// Settings reads a Settings file (nil for the other kinds), and
	// Refuses says which of its settings a change may not add or change.
	Settings SettingsRule
	Refuses  string
	// Source is where the tool documents reading it (a URL or a path in
	// its source), for the entries decided from it.
	Source string
}

// Why is the reason shown for a change at the name.
func (n Name) Why() string {
	switch n.Kind {
	case Instruction:
		return n.Tool + " reads it " + n.When
	case Settings:
		return n.Tool + " reads it " + n.When + " and runs the programs it names"
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
	p := func(pattern, tool, when string) Name {
		return Name{Pattern: pattern, Kind: Protect, Tool: tool, When: when}
	}
	// ps is a Protect name decided from the tool's source or docs.
	ps := func(pattern, tool, when, source string) Name {
		return Name{Pattern: pattern, Kind: Protect, Tool: tool, When: when, Source: source}
	}
	// set is a Settings name: rule reads which of its settings run, and
	// refuses says which those are.
	set := func(pattern, tool, when string, rule SettingsRule, refuses, source string) Name {
		return Name{Pattern: pattern, Kind: Settings, Tool: tool, When: when, Settings: rule, Refuses: refuses, Source: source}
	}
	// hook is a hook manager's file: it runs only through a git hook.
	hook := func(pattern, tool string) Name {
		return Name{Pattern: pattern, Kind: Hooked, Tool: tool, When: onCommit}
	}
	i := func(pattern, tool string) Name {
		return Name{Pattern: pattern, Kind: Instruction, Tool: tool, When: "as instructions at the start of a session"}
	}
	return []Name{
		// Version control that runs configured programs on any command.
		set(".gitmodules", "git submodule", "on submodule update (its URLs decide what is cloned, its settings how)", gitmodulesSettings, "an entry git would not act on safely: a URL with a transport helper or an option, a local path the command could have planted, update = !command, a key git does not read there", "git Documentation/gitmodules.adoc; submodule-config.c"),
		set(".hg/hgrc*", "Mercurial", "on every hg command (hooks, extensions, aliases)", hgrcSettings, "anything outside an allow-list of settings that run nothing ([paths] not into a place the command could plant, [ui] username and display settings, [diff], [color], [commands], templates, [phases], [format], disabling an extension), and %include", "mercurial/config.py parse; configitems.py"),
		set(".hg/requires", "Mercurial", "on every hg command (shared takes another repository's hgrc)", hgRequires, "shared and relshared", "mercurial/localrepo.py makelocalrepository"),
		set(".hg/store/requires", "Mercurial", "on every hg command (shared takes another repository's hgrc)", hgRequires, "shared and relshared", "mercurial/localrepo.py makelocalrepository"),
		ps(".hgsub", "Mercurial", "on hg update and clone (subrepositories cloned from it run their source's hooks)", "mercurial/subrepoutil.py state"),
		ps(".sl/config*", "Sapling", "on every sl command (hooks, extensions)", "facebook/sapling eden/scm/lib/config/loader/src/hg.rs"),
		ps(".sl/sharedpath", "Sapling", "on every sl command", "facebook/sapling eden/scm/lib/repo/repo-minimal-info"),
		ps(".sl/requires", "Sapling", "on every sl command", "facebook/sapling eden/scm/lib/repo/repo-minimal-info"),
		ps("_darcs/prefs/defaults", "Darcs", "on every darcs command (prehook and posthook run)", "darcs: _darcs/prefs/defaults"),
		ps(".pijul/config", "Pijul", "on every pijul record ([hooks])", "pijul/src/config.rs Hooks"),
		ps(".bzr/branch/branch.conf", "Breezy", "on every commit (post_commit is evaluated)", "breezy/commit.py"),
		ps(".bzr/branch/location", "Breezy", "on every brz command in a checkout (the branch it takes)", "breezy/bzr/branch.py"),
		ps(".fslckout", "Fossil", "on every fossil command (it names the repository whose hooks and editor run)", "fossil checkout database vvar.repository"),
		ps("_FOSSIL_", "Fossil", "on every fossil command (it names the repository whose hooks and editor run)", "fossil checkout database vvar.repository"),
		ps(".jj/workspace-config-id", "Jujutsu", "on every jj command (which config it loads)", "jj-vcs/jj lib/src/secure_config.rs"),
		ps(".jj/repo/store/git_target", "Jujutsu", "on every jj command (the git directory jj runs git on)", "jj-vcs/jj lib/src/git_backend.rs"),
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
		set(".tool-versions", "asdf and mise", "when a shimmed tool runs", toolVersions, "a path: version", "asdf internal/toolversions/toolversions.go (path: versions)"),
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
		p(".config/sapling", "Sapling", "on every sl command (global config)"),
		p(".fossil", "Fossil", "on every fossil command (global settings)"),
		p(".config/fossil.db", "Fossil", "on every fossil command (global settings)"),
		p(".darcs", "Darcs", "on every darcs command (global defaults: hooks)"),
		p(".config/breezy", "Breezy", "on every brz command (plugins, config)"),
		p(".bazaar", "Bazaar", "on every bzr command (plugins, config)"),
		p(".subversion", "Subversion", "on every svn command (editor, diff and tunnel programs)"),
		p(".config/goose", "Goose", onStart+" (extensions)"),

		// Editors and IDEs.
		p(".vscode", "VS Code and its forks", onOpen+" (tasks run on folderOpen, settings name programs)"),
		p("*.code-workspace", "VS Code and its forks", onOpen+" (embedded tasks and settings)"),
		{Pattern: ".devcontainer", Kind: Asked, Tool: "Dev Containers", When: "only when the person chooses to reopen the folder in a container (initializeCommand then runs on the host)", Source: "https://containers.dev/implementors/json_reference/#lifecycle-scripts"},
		{Pattern: ".devcontainer.json", Kind: Asked, Tool: "Dev Containers", When: "only when the person chooses to reopen the folder in a container (initializeCommand then runs on the host)", Source: "https://containers.dev/implementors/json_reference/#lifecycle-scripts"},
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
		ps(".helix", "Helix", onOpen+" (language servers from languages.toml, without asking)", "helix-loader/src/config.rs"),
		ps(".lapce", "Lapce", onOpen+" (settings merged without asking)", "lapce-app/src/config.rs"),
		ps(".vs", "Visual Studio", onOpen+" (tasks, CMake settings)", "learn.microsoft.com: customize build and debug tasks"),
		ps(".externalToolBuilders", "Eclipse", "on every build of the imported project (external tool builders)", "Eclipse ExternalToolBuilder"),
		ps(".air", "JetBrains Air", onStart+" (MCP servers)", "https://www.jetbrains.com/help/air/mcp-servers.html"),
		{Pattern: ".nova", Kind: Asked, Tool: "Nova", When: "only when the person runs a task", Source: "Nova tasks"},
		{Pattern: "*.launch", Kind: Asked, Tool: "Eclipse", When: "only when the person starts that launch configuration", Source: "Eclipse launch configurations"},
		{Pattern: ".vimspector.json", Kind: Asked, Tool: "vimspector", When: "only when the person starts debugging", Source: "puremourning/vimspector"},
		{Pattern: ".gadgets.json", Kind: Asked, Tool: "vimspector", When: "only when the person starts debugging", Source: "puremourning/vimspector"},
		{Pattern: ".gadgets.d", Kind: Asked, Tool: "vimspector", When: "only when the person starts debugging", Source: "puremourning/vimspector"},
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
		ps(".amp", "Amp", onStart+" (settings, MCP servers)", "ampcode.com manual: settings"),
		ps(".openhands", "OpenHands", onStart+" (setup.sh, hooks)", "docs.openhands.dev: repository customization"),
		ps(".kilocode", "Kilo Code", onStart+" (MCP servers)", "kilo.ai/docs: MCP"),
		ps(".kilo", "Kilo Code", onStart+" (MCP servers)", "kilo.ai/docs: MCP"),
		ps("kilo.json", "Kilo Code", onStart+" (MCP servers)", "kilo.ai/docs: MCP"),
		ps("kilo.jsonc", "Kilo Code", onStart+" (MCP servers)", "kilo.ai/docs: MCP"),
		ps(".trae", "Trae", onStart+" (MCP servers)", "Trae: project MCP"),
		ps(".augment", "Augment", onStart+" (hooks, commands)", "docs.augmentcode.com/cli/hooks"),
		ps(".tabnine", "Tabnine", onStart+" (hooks, MCP servers)", "docs.tabnine.com: agent MCP"),
		ps(".github/mcp.json", "GitHub Copilot CLI", onStart+" (MCP servers)", "docs.github.com: Copilot CLI MCP server loading"),
		ps(".github/skills", "GitHub Copilot", onStart+" (skills and their scripts)", "docs.github.com: customize Copilot"),

		// Git hook managers: the installed hook reads these when it runs.
		hook(".husky", "husky"),
		hook(".huskyrc", "husky 4"),
		hook(".huskyrc.*", "husky 4"),
		hook("husky.config.*", "husky 4"),
		hook(".pre-commit-config.yaml", "pre-commit"),
		hook(".pre-commit-config.yml", "pre-commit"),
		hook("lefthook.*", "lefthook"),
		hook(".lefthook.*", "lefthook"),
		hook("lefthook-local.*", "lefthook"),
		hook(".lefthook-local.*", "lefthook"),
		hook(".lefthook", "lefthook"),
		hook(".lefthook-local", "lefthook"),
		hook(".config/lefthook.*", "lefthook"),
		hook(".config/lefthook-local.*", "lefthook"),
		hook("hk.pkl", "hk"),
		hook("hk.local.pkl", "hk"),
		hook(".config/hk.pkl", "hk"),
		hook(".config/hk.local.pkl", "hk"),
		hook(".overcommit.yml", "overcommit"),
		hook(".git-hooks", "overcommit (plugins)"),
		hook(".lintstagedrc", "lint-staged"),
		hook(".lintstagedrc.*", "lint-staged"),
		hook("lint-staged.config.*", "lint-staged"),
		hook(".commitlintrc", "commitlint"),
		hook(".commitlintrc.*", "commitlint"),
		hook("commitlint.config.*", "commitlint"),

		hook(".config/lefthook", "lefthook (scripts)"),
		hook(".config/lefthook-local", "lefthook (scripts)"),
		hook(".githooks", "git-hooks, and core.hooksPath by convention"),
		hook(".simple-git-hooks.*", "simple-git-hooks"),
		hook("simple-git-hooks.*", "simple-git-hooks"),

		// Package managers: settings files that name a program, shell or
		// preload they run, and files they run as code.
		set(".npmrc", "npm, pnpm 10 and Yarn 1", "on every npm, pnpm and yarn command below it", npmrcSettings, "a setting that names a program, shell, preload or config file (script-shell, node-options, userconfig, globalconfig, prefix, git, editor, shell, node-gyp, call, pnpmfile, yarn-path, ...), a key with a variable, and any key npm, pnpm and Yarn do not document as a plain setting (npm passes those to scripts, where node-gyp reads python and make from them)", "npm @npmcli/config lib/definitions/definitions.js; ini@6 lib/ini.js; node-gyp lib/node-gyp.js"),
		set(".yarnrc", "Yarn 1", "on every yarn command below it", yarnrcSettings, "the same keys as .npmrc, and anything but plain \"key value\" lines", "yarnpkg/yarn src/rc.js, src/registries/yarn-registry.js"),
		set(".yarnrc.yml", "Yarn", "on every yarn command below it", yarnrcYMLSettings, "yarnPath and yarn-path, ignorePath, plugins, injectEnvironmentFiles, enableConstraintsChecks, constraintsPath, pnpShebang, lockfileFilename, script-shell, env, prefix, flags (--*), and a file in Yarn's old lockfile grammar", "yarnpkg/berry packages/yarnpkg-core/sources/Configuration.ts; yarnpkg/yarn src/rc.js"),
		set("pnpm-workspace.yaml", "pnpm", "on every pnpm command below it", pnpmWorkspaceSettings, "scriptShell, nodeOptions, pnpmfile, globalPnpmfile, npmPath, configDependencies, lockfileDir, dir, the Node.js and package manager pnpm downloads (nodeVersion, useNodeVersion, nodeDownloadMirrors, runtime, pmOnFail, ...), executionEnv, dangerouslyAllowAllBuilds, a key with a variable", "pnpm config/config/src/types.ts"),
		ps(".pnpmfile.cjs", "pnpm", "on every pnpm command, pnpm --version included", "pnpm pnpm/src/getConfig.ts requireHooks"),
		ps(".pnpmfile.mjs", "pnpm", "on every pnpm command, pnpm --version included", "pnpm pnpm/src/getConfig.ts requireHooks"),
		ps(".env.yarn", "Yarn", "in every script Yarn runs (its variables, NODE_OPTIONS among them)", "Yarn's injectEnvironmentFiles (default .env.yarn)"),
		ps(".corepack.env", "Corepack", "on every shimmed yarn or pnpm (where it downloads the package manager it runs)", "corepack: COREPACK_* variables from .corepack.env"),
		set("bunfig.toml", "Bun", "on every bun command in that directory", bunfig, "preload, test.preload, serve.static.plugins, install.security.scanner, debug.editor, macros, run.bun", "oven-sh/bun src/bunfig.zig; bun.com/docs/runtime/bunfig"),
		set("uv.toml", "uv", "on every uv command below it", uvTOML, "pip.python, python, python-install-mirror, pypy-install-mirror, python-downloads-json-url, keyring-provider, cache-dir", "astral-sh/uv crates/uv-settings"),
		ps(".bundle/plugin", "Bundler", "on bundle install and plugin commands (plugins.rb is loaded)", "rubygems bundler/lib/bundler/plugin/index.rb"),
		set(".bundle/config", "Bundler", "on bundle commands below it", bundleConfig, "BUNDLE_GEMFILE, BUNDLE_APP_CONFIG, BUNDLE_PLUGINS, BUNDLE_LOCAL__*, BUNDLE_BUILD__*", "rubygems bundler/lib/bundler/settings.rb"),

		// Language toolchain pins that can name a path.
		set("rust-toolchain", "rustup", "on every cargo, rustc and rustup command below it", rustToolchain, "a toolchain that is a path (a one-line path, or toolchain.path)", "rust-lang/rustup src/config.rs parse_override_file"),
		set("rust-toolchain.toml", "rustup", "on every cargo, rustc and rustup command below it", rustToolchainTOML, "toolchain.path", "rust-lang/rustup src/config.rs OverrideFile"),
		set(".cargo/config.toml", "Cargo", "on cargo metadata, tree, fetch and every build below it (editors run cargo metadata when a folder opens)", cargoConfig, "build.rustc, rustc-wrapper, rustc-workspace-wrapper, rustdoc; linkers and runners; [env]; [alias]; include; credential providers; doc.browser; [unstable]; rustflags that name a linker or load code; a build script override's link flags", "rust-lang/cargo doc/book/src/reference/config.md"),
		set(".cargo/config", "Cargo", "on cargo metadata, tree, fetch and every build below it (editors run cargo metadata when a folder opens)", cargoConfig, "build.rustc, rustc-wrapper, rustc-workspace-wrapper, rustdoc; linkers and runners; [env]; [alias]; include; credential providers; doc.browser; [unstable]; rustflags that name a linker or load code; a build script override's link flags", "rust-lang/cargo doc/book/src/reference/config.md"),
		set(".python-version", "uv (and pyenv)", "on every uv command and pyenv shim below it", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "astral-sh/uv crates/uv-python version_files.rs (a path is an interpreter)"),
		set(".python-versions", "uv", "on every uv command below it", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "astral-sh/uv crates/uv-python version_files.rs"),
		set(".ruby-version", "rbenv", "on every ruby shim below it", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "rbenv libexec/rbenv-version-file-read (before 1.2 it follows ..)"),
		set(".java-version", "jenv", "on every java shim below it", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "jenv libexec/jenv-version-file-read (no traversal check)"),
		set(".terraform-version", "tfenv", "on every terraform below it", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "tfutils/tfenv lib/helpers.sh read_version_file"),
		set(".node-version", "nodenv and other Node.js version managers", "on every node shim below it", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "nodenv libexec/nodenv-version-file-read"),
		set(".sdkmanrc", "SDKMAN!", "when a shell enters the directory (sdkman_auto_env)", versionPin, "a version that is a path (with /, \\\\, .., or a leading ~ or .)", "sdkman-cli src/main/bash/sdkman-env.sh"),
		set(".bazelversion", "bazelisk", "on every bazel command below it", bazelVersion, "anything but a version or a label (a path, a fork)", "bazelbuild/bazelisk core/core.go"),
		ps(".bazeliskrc", "bazelisk", "on every bazel command below it (where Bazel is downloaded from and run)", "bazelbuild/bazelisk config/config.go"),
		ps("tools/bazel", "bazelisk", "on every bazel command, in place of Bazel", "bazelbuild/bazelisk core/core.go"),
		ps("tools/bazel.*", "bazelisk", "on every bazel command, in place of Bazel", "bazelbuild/bazelisk core/core.go"),
		set(".bazelrc", "Bazel", "on every bazel command below it", bazelrc, "startup options, import and try-import, and options that name a program (--workspace_status_command, --run_under, --credential_helper, --host_jvm_args, ...)", "https://bazel.build/run/bazelrc"),
		ps(".mvn/jvm.config", "Maven", "on every mvn command, mvn --version included (JVM options: -javaagent)", "/usr/share/maven/bin/mvn concat_lines"),
		ps(".mvn/maven.config", "Maven", "on every mvn command (command-line options: extensions, settings)", "https://maven.apache.org/configure.html"),
		ps(".sbtopts", "sbt", "on every sbt command, sbt --version included (--java-home, --sbt-jar)", "sbt/sbt sbt launcher script"),
		ps(".jvmopts", "sbt", "on every sbt command (JVM options: -javaagent)", "sbt/sbt sbt launcher script"),

		// REPL and debugger start-up files read from the working directory.
		ps(".pdbrc", "pdb", "when the Python debugger starts here (python -m pdb, breakpoint())", "CPython Lib/pdb.py Pdb.__init__"),
		ps(".irbrc", "irb", "when irb starts here", "ruby/irb lib/irb/init.rb rc_files"),
		ps("irbrc", "irb", "when irb starts here", "ruby/irb lib/irb/init.rb rc_files"),
		ps("irb.rc", "irb", "when irb starts here", "ruby/irb lib/irb/init.rb rc_files"),
		ps("_irbrc", "irb", "when irb starts here", "ruby/irb lib/irb/init.rb rc_files"),
		ps("$irbrc", "irb", "when irb starts here", "ruby/irb lib/irb/init.rb rc_files"),
		ps(".config/irb", "irb", "when irb starts here", "ruby/irb lib/irb/init.rb rc_files"),
		ps(".pryrc", "pry", "when pry starts here", "pry/pry lib/pry/pry_class.rb LOCAL_RC_FILE"),
		ps(".byebugrc", "byebug", "when byebug starts here", "deivid-rodriguez/byebug lib/byebug/core.rb run_init_script"),
		ps(".perldb", "the Perl debugger", "when perl -d starts here", "perl5db.pl rc file"),
		ps("perldb.ini", "the Perl debugger", "when perl -d starts here", "perl5db.pl rc file"),
		ps(".proverc", "prove", "on every prove here (--exec runs a program)", "Test::Harness App/Prove.pm"),
		ps("_proverc", "prove", "on every prove here", "Test::Harness App/Prove.pm"),
		ps(".gdbinit", "gdb", "when gdb starts here, where your auto-load safe-path allows it", "gdb: Init File in the Current Directory"),
		ps("*-gdb.py", "gdb", "when gdb loads the object file beside it, where your auto-load safe-path allows it", "gdb: objfile-gdb.ext file"),
		ps("*-gdb.gdb", "gdb", "when gdb loads the object file beside it, where your auto-load safe-path allows it", "gdb: objfile-gdb.ext file"),
		ps("*-gdb.scm", "gdb", "when gdb loads the object file beside it, where your auto-load safe-path allows it", "gdb: objfile-gdb.ext file"),
		ps(".lldbinit", "lldb", "when lldb starts here, where target.load-cwd-lldbinit allows it", "lldb driver: is_cwd_lldbinit_file_read"),

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
		i("WARP.md", "Warp"),
		i(".aiassistant/rules", "JetBrains AI Assistant"),
		i(".github/copilot-instructions.md", "GitHub Copilot"),
		i(".github/instructions", "GitHub Copilot"),
		i(".github/prompts", "GitHub Copilot"),
		// Read as variables by most tools, but sourced as shell code by
		// autoenv and oh-my-zsh's dotenv plugin on cd; refusing it would
		// break everyday work, so it is listed.
		{Pattern: ".env", Kind: Instruction, Tool: "autoenv and oh-my-zsh's dotenv plugin (source it); direnv, Aider", When: "when a shell enters the directory"},
	}
}

// PackageTrees are directories package managers fill with other people's
// files: a protected name inside one is committed and listed (refusing it
// would break installs), never reviewed.
func PackageTrees() []string {
	return []string{"node_modules", "bower_components", "vendor", "site-packages", "dist-packages"}
}

// Matcher finds names in paths. Build it once (NewMatcher) per run, or
// per process for a fixed list (Builtin): matching is on every path a
// commit writes. It is read only once made, so safe for concurrent use.
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
