package persist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// settingsCase is a change to a Settings file: before ("" for none) and
// after, and whether the change is refused.
type settingsCase struct {
	name, before, after string
	refuse              bool
}

// runSettings judges each case at rel in a fresh workspace, the tree
// before in one directory and the final tree in another.
func runSettings(t *testing.T, rel string, cases []settingsCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ws, before := filepath.Join(dir, "ws"), filepath.Join(dir, "before")
			os.MkdirAll(ws, 0o755)
			os.MkdirAll(before, 0o755)
			if tc.before != "" {
				tree(t, before, map[string]string{rel: tc.before})
			}
			tree(t, ws, map[string]string{rel: tc.after})
			c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: viewFS{ws, before}, Names: NewMatcher(Builtin())})
			v := c.Check(rel, File)
			if (v.Action == Refuse) != tc.refuse {
				t.Errorf("%s: %q -> %q: %v (%s), want refused=%v", rel, tc.before, tc.after, v.Action, v.Why, tc.refuse)
			}
			if v.Action == Refuse && v.Why == "" {
				t.Errorf("refused without a reason")
			}
		})
	}
}

func TestNpmrcSettings(t *testing.T) {
	runSettings(t, "web/.npmrc", []settingsCase{
		{"registry", "", "registry=https://registry.example.com/\n", false},
		{"registry changed", "registry=https://a/\n", "registry=https://b/\nsave-exact=true\n", false},
		{"auth", "", "//registry.npmjs.org/:_authToken=abc\n@me:registry=https://r/\nalways-auth=true\n", false},
		{"pnpm settings", "", "auto-install-peers=true\nshamefully-hoist=true\nnode-linker=hoisted\nstrict-peer-dependencies=false\n", false},
		{"comments", "", "; a comment\n# another\n\nlegacy-peer-deps=true\n", false},
		{"script-shell", "", "script-shell=/tmp/evil\n", true},
		{"script_shell", "", "script_shell=/tmp/evil\n", true},
		{"Script-Shell", "", "Script-Shell=/tmp/evil\n", true},
		{"node-options", "", "node-options=--require ./x.js\n", true},
		{"key with a variable", "", "${K}=/tmp/evil\n", true},
		{"escaped key", "", "\"script\\u002dshell\"=/tmp/evil\n", true},
		{"single-quoted key", "", "'script-shell'=/tmp/evil\n", true},
		{"array key", "", "'[\"script-shell\"]'=/tmp/evil\n", true},
		{"inline comment in key", "", "script-shell#x=/tmp/evil\n", true},
		{"byte order mark", "", "\ufeffscript-shell=/tmp/evil\n", true},
		{"carriage returns", "", "registry=x\rscript-shell=/tmp/evil\r", true},
		{"unknown key node-gyp reads", "", "python=/tmp/evilpy\n", true},
		{"unknown key", "", "sharp_binary_host=https://evil/\n", true},
		{"userconfig", "", "userconfig=./other.npmrc\n", true},
		{"prefix", "", "prefix=./p\n", true},
		{"pnpmfile", "", "pnpmfile=./x.cjs\n", true},
		{"token helper", "", "//r/:tokenHelper=/tmp/x\n", true},
		{"in a section", "", "[x]\nscript-shell=/tmp/evil\n", true},
		{"kept as it was", "script-shell=/bin/bash\n", "script-shell=/bin/bash\nregistry=https://r/\n", false},
		{"changed value", "script-shell=/bin/bash\n", "script-shell=/tmp/evil\n", true},
		{"removed", "script-shell=/bin/bash\nregistry=x\n", "registry=x\n", false},
		{"pnpm lockfile dir", "", "lockfile-dir=/w/node_modules/x\n", true},
	})
	runSettings(t, ".bundle/config", []settingsCase{
		{"jobs and path", "", "---\nBUNDLE_JOBS: \"4\"\nBUNDLE_PATH: \"vendor/bundle\"\n", false},
		{"gemfile", "", "---\nBUNDLE_GEMFILE: \"evil/Gemfile\"\n", true},
		{"gemfile in a block scalar", "", "BUNDLE_JOBS: |\n BUNDLE_GEMFILE: \"evil/Gemfile\"\n", true},
		{"local gem", "", "BUNDLE_LOCAL__RACK: \"/w/rack\"\n", true},
	})
}

func TestYarnrcSettings(t *testing.T) {
	runSettings(t, ".yarnrc.yml", []settingsCase{
		{"node linker", "", "nodeLinker: node-modules\nenableTelemetry: false\nnpmRegistryServer: \"https://r/\"\n", false},
		{"empty", "", "", false},
		{"yarnPath", "", "yarnPath: .yarn/releases/evil.cjs\n", true},
		{"escaped key", "", "\"yarn\\x50ath\": .yarn/releases/evil.cjs\n", true},
		{"complex key", "", "? [yarnPath]\n: ./evil.cjs\n", true},
		{"merge key", "", "base: &b {yarnPath: ./evil.cjs}\n<<: *b\n", true},
		{"on-conflict wrapper", "", "yarnPath:\n  onConflict: reset\n  value: ./evil.cjs\n", true},
		{"flow mapping", "", "{yarnPath: ./evil.cjs}\n", true},
		{"yarn 1 spelling", "", "yarn-path: ./evil.cjs\n", true},
		{"plugins", "", "plugins:\n  - path: .yarn/plugins/x.cjs\n", true},
		{"env files", "", "injectEnvironmentFiles: [.env.evil]\n", true},
		{"duplicate key", "", "nodeLinker: pnp\nyarnPath: a\nyarnPath: b\n", true},
		{"legacy grammar", "", "# yarn lockfile v1\nyarnPath \"./evil.cjs\"\n", true},
		{"two documents", "", "nodeLinker: pnp\n---\nyarnPath: x\n", true},
		{"not a mapping", "", "- yarnPath\n", true},
		{"kept", "yarnPath: .yarn/releases/yarn-4.1.0.cjs\n", "yarnPath: .yarn/releases/yarn-4.1.0.cjs\nnodeLinker: node-modules\n", false},
		{"upgraded", "yarnPath: .yarn/releases/yarn-4.1.0.cjs\n", "yarnPath: .yarn/releases/yarn-4.2.0.cjs\n", true},
		{"prototype", "", "nodeLinker: node-modules\n__proto__: {yarnPath: ./e.js}\n", true},
	})
	runSettings(t, ".yarnrc", []settingsCase{
		{"registry", "", "registry \"https://registry.example.com/\"\n# comment\nsave-prefix \"~\"\n", false},
		{"unquoted", "", "save-exact true\n", false},
		{"yarn-path", "", "yarn-path \"./evil.js\"\n", true},
		{"yarn-path colon", "", "yarn-path: ./evil.js\n", true},
		{"flag", "", "--install.ignore-scripts false\n", true},
		{"several keys", "", "foo, yarn-path \"./evil.js\"\n", true},
		{"json", "", "{\"yarn-path\": \"./evil.js\"}\n", true},
		{"conflict", "", "<<<<<<< a\nyarn-path \"x\"\n=======\n>>>>>>> b\n", true},
		{"nested", "", "env:\n  NODE_OPTIONS \"--require x\"\n", true},
		{"carriage return", "", "network-timeout 600000\ryarn-path ./e.js\n", true},
	})
	runSettings(t, "pnpm-workspace.yaml", []settingsCase{
		{"packages", "", "packages:\n  - 'packages/*'\nonlyBuiltDependencies: [esbuild]\ncatalog:\n  react: ^18\n", false},
		{"script shell", "", "scriptShell: /tmp/evil\n", true},
		{"kebab", "", "script-shell: /tmp/evil\n", true},
		{"pnpmfile", "", "pnpmfile: ./x.cjs\n", true},
		{"node options", "", "nodeOptions: --require ./x.js\n", true},
		{"prototype", "", "packages: [\".\"]\n__proto__: {scriptShell: /x}\n", true},
		{"tagged merge", "", "packages: [\".\"]\n!!merge : {pnpmfile: /x}\n", true},
		{"long tagged merge", "", "packages: [\".\"]\n!<tag:yaml.org,2002:merge> : {pnpmfile: /x}\n", true},
		{"merge in a flow mapping", "", "{packages: [\".\"], !!merge : {scriptShell: /x}}\n", true},
	})
}

func TestToolchainSettings(t *testing.T) {
	runSettings(t, "rust-toolchain", []settingsCase{
		{"channel", "", "stable\n", false},
		{"dated", "", "nightly-2024-01-01\n", false},
		{"path", "", "/tmp/tc\n", true},
		{"path with spaces", "", "  /tmp/tc  \n", true},
		{"toml channel", "", "[toolchain]\nchannel = \"1.80\"\ncomponents = [\"clippy\"]\n", false},
		{"toml path", "", "[toolchain]\npath = \"/tmp/tc\"\n", true},
		{"bad toml", "", "[toolchain\npath\n", true},
	})
	runSettings(t, "rust-toolchain.toml", []settingsCase{
		{"channel", "", "[toolchain]\nchannel = \"stable\"\n", false},
		{"path", "", "[toolchain]\npath = \"/tmp/tc\"\n", true},
		{"inline table", "", "toolchain = { path = \"/tmp/tc\" }\n", true},
		{"dotted", "", "toolchain.path = \"/tmp/tc\"\n", true},
		{"escaped key", "", "[toolchain]\n\"p\\u0061th\" = \"/tmp/tc\"\n", true},
		{"repeated key", "", "[toolchain]\nchannel = \"stable\"\nchannel = \"beta\"\n", true},
	})
	runSettings(t, "crate/.cargo/config.toml", []settingsCase{
		{"jobs", "", "[build]\njobs = 4\ntarget-dir = \"out\"\n[profile.release]\nlto = true\n", false},
		{"rustflags", "", "[build]\nrustflags = [\"-C\", \"target-cpu=native\"]\n", false},
		{"wrapper", "", "[build]\nrustc-wrapper = \"/tmp/w\"\n", true},
		{"rustc", "", "build.rustc = \"bin/rustc\"\n", true},
		{"runner", "", "[target.'cfg(unix)']\nrunner = \"./r.sh\"\n", true},
		{"linker", "", "[target.x86_64-unknown-linux-gnu]\nlinker = \"./ld\"\n", true},
		{"linker flag", "", "[build]\nrustflags = [\"-C\", \"linker=./ld\"]\n", true},
		{"env", "", "[env]\nLD_PRELOAD = \"/tmp/x.so\"\n", true},
		{"alias", "", "[alias]\nfmt = \"run\"\n", true},
		{"include", "", "include = [\"extra.toml\"]\n", true},
		{"argfile", "", "[build]\nrustflags = [\"@flags.txt\"]\n", true},
		{"credential provider", "", "[registry]\ncredential-provider = \"/tmp/c\"\n", true},
	})
	runSettings(t, ".python-version", []settingsCase{
		{"version", "", "3.11\n", false},
		{"versions", "", "3.12\npypy3.10\n", false},
		{"path", "", "/usr/bin/python3\n", true},
		{"relative", "", "./venv/bin/python\n", true},
		{"traversal", "", "../../x\n", true},
	})
	runSettings(t, ".tool-versions", []settingsCase{
		{"versions", "", "nodejs 20.11.0\npython 3.12.1 3.11.7 # fallback\n", false},
		{"path", "", "nodejs path:/tmp/node\n", true},
	})
	runSettings(t, ".bazelversion", []settingsCase{
		{"version", "", "7.1.0\n", false},
		{"label", "", "last_green\n", false},
		{"path", "", "/tmp/bazel\n", true},
		{"fork", "", "evil/7.0.0\n", true},
	})
	runSettings(t, "bunfig.toml", []settingsCase{
		{"install", "", "[install]\nexact = true\n", false},
		{"preload", "", "preload = [\"./x.ts\"]\n", true},
		{"test preload", "", "[test]\npreload = \"./x.ts\"\n", true},
	})
	runSettings(t, ".bazelrc", []settingsCase{
		{"build flags", "", "build --jobs=8\ntest --test_output=errors\n", false},
		{"startup", "", "startup --host_jvm_args=-javaagent:x.jar\n", true},
		{"import", "", "try-import %workspace%/user.bazelrc\n", true},
		{"status command", "", "build --workspace_status_command=./s.sh\n", true},
	})
}

// A hook manager's file is refused only where a hook can run it; a Dev
// Containers file is listed; what the command clones is judged like
// anything else.
func TestNameKinds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before map[string]string
		after  map[string]string
		global string
		rel    string
		want   Action
	}{
		{"hook manager, no hooks", map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/hooks/pre-commit.sample": "x"},
			map[string]string{".pre-commit-config.yaml": "repos: []\n"}, "", ".pre-commit-config.yaml", List},
		{"hook manager, hook installed", map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/hooks/pre-commit": "#!/bin/sh\npre-commit\n"},
			map[string]string{".pre-commit-config.yaml": "repos: []\n"}, "", ".pre-commit-config.yaml", Refuse},
		{"husky, hooksPath", map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n\thooksPath = .husky/_\n"},
			map[string]string{".husky/pre-commit": "npm test\n"}, "", ".husky/pre-commit", Refuse},
		{"husky, your hooksPath", map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": ""},
			map[string]string{".husky/pre-commit": "npm test\n"}, "[core]\n\thooksPath = ~/hooks\n", ".husky/pre-commit", Refuse},
		{"hook manager, no repository", nil, map[string]string{"lefthook.yml": "pre-commit: {}\n"}, "", "lefthook.yml", List},
		{"hook manager, nested clone", map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/hooks/pre-commit": "x"},
			map[string]string{"lib/.git/HEAD": head, "lib/.git/objects/": "", "lib/.git/refs/": "", "lib/.git/config": "[remote \"origin\"]\n\turl = https://x/y\n", "lib/.husky/pre-commit": "x\n"},
			"", "lib/.husky/pre-commit", List},
		{"dev container", nil, map[string]string{".devcontainer/devcontainer.json": "{}\n"}, "", ".devcontainer/devcontainer.json", List},
		{"dev container beside one chosen", map[string]string{".devcontainer.json": "{}\n"}, map[string]string{".devcontainer/devcontainer.json": "{}\n"}, "", ".devcontainer/devcontainer.json", Refuse},
		{"dev container changed", map[string]string{".devcontainer/devcontainer.json": "{}\n"}, map[string]string{".devcontainer/devcontainer.json": "{\"initializeCommand\": \"x\"}\n"}, "", ".devcontainer/devcontainer.json", Refuse},
		{"hook manager, hooksPath included", map[string]string{".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/config": "[include]\n\tpath = ../team.gitconfig\n", "team.gitconfig": "[core]\n\thooksPath = .husky/_\n"},
			map[string]string{".husky/pre-commit": "npm test\n"}, "", ".husky/pre-commit", Refuse},
		{"clone's envrc", nil, map[string]string{"lib/.git/HEAD": head, "lib/.git/objects/": "", "lib/.git/refs/": "",
			"lib/.git/config": "[remote \"origin\"]\n\turl = https://x/y\n", "lib/.envrc": "evil\n"}, "", "lib/.envrc", Refuse},
		{"clone's hgrc", nil, map[string]string{"lib/.git/HEAD": head, "lib/.git/objects/": "", "lib/.git/refs/": "",
			"lib/.git/config": "[remote \"origin\"]\n\turl = https://x/y\n", "lib/.vscode/tasks.json": "{}\n"}, "", "lib/.vscode/tasks.json", Refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ws, before, home := filepath.Join(dir, "ws"), filepath.Join(dir, "before"), filepath.Join(dir, "home")
			for _, d := range []string{ws, before, home} {
				os.MkdirAll(d, 0o755)
			}
			tree(t, before, tc.before)
			tree(t, ws, tc.before)
			tree(t, ws, tc.after)
			var globals []string
			if tc.global != "" {
				g := filepath.Join(home, ".gitconfig")
				os.WriteFile(g, []byte(tc.global), 0o644)
				globals = append(globals, g)
			}
			m := NewMatcher(Builtin())
			s, _ := ScanWorkspace(before, m, nil)
			var repos []Repo
			for _, r := range s.Repos(before, Host{}) {
				r.GitDir = ws + strings.TrimPrefix(r.GitDir, before)
				repos = append(repos, r)
			}
			c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: viewFS{ws, before}, Names: m, StartRepos: repos,
				Home: home, GlobalConfigs: globals})
			if v := c.Check(tc.rel, File); v.Action != tc.want {
				t.Errorf("Check(%s) = %v (%s), want %v", tc.rel, v.Action, v.Why, tc.want)
			}
		})
	}
}

// A symlink that stands for a directory the rules do not judge (a package
// manager's tree, a root the command writes unchecked) is refused: a tool
// started through it would read its configuration there.
func TestLinkIntoUnchecked(t *testing.T) {
	dir := t.TempDir()
	ws, cache := filepath.Join(dir, "ws"), filepath.Join(dir, "cache")
	tree(t, ws, map[string]string{
		"node_modules/.web/.npmrc": "script-shell=/x\n", "node_modules/x/bin/cli.js": "x", "src/app/": "",
		"web":                   "-> node_modules/.web",
		"cli":                   "-> node_modules/x/bin/cli.js",
		"node_modules/.bin/cli": "-> ../x/bin/cli.js",
		"node_modules/ws-pkg":   "-> ../src/app",
		"app":                   "-> src/app",
		"cached":                "-> " + filepath.Join(cache, "w"),
		"dangling":              "-> node_modules/none",
	})
	tree(t, cache, map[string]string{"w/.pdbrc": "!x\n"})
	c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: viewFS{ws, filepath.Join(dir, "empty")}, Names: NewMatcher(Builtin()),
		Unguarded: []string{cache}})
	for rel, refuse := range map[string]bool{"web": true, "cached": true, "cli": false, "node_modules/.bin/cli": false,
		"node_modules/ws-pkg": false, "app": false, "dangling": false} {
		if v := c.Check(rel, Symlink); (v.Action == Refuse) != refuse {
			t.Errorf("Check(%s, Symlink) = %v (%s), want refused=%v", rel, v.Action, v.Why, refuse)
		}
	}
}

// What an existing settings file names that its tool runs (a yarnPath, a
// Cargo include, an hg %include) is as protected as the setting.
func TestSettingsNameFiles(t *testing.T) {
	dir := t.TempDir()
	ws, before := filepath.Join(dir, "ws"), filepath.Join(dir, "before")
	start := map[string]string{
		".yarnrc.yml": "yarnPath: .yarn/releases/yarn-4.0.0.cjs\n", ".yarn/releases/yarn-4.0.0.cjs": "yarn\n",
		"crate/.cargo/config.toml": "include = [{ path = \"local.toml\", optional = true }]\n",
		"lib/.hg/hgrc":             "[ui]\nusername = x\n%include ../../team.hgrc\n", "team.hgrc": "[ui]\n",
		"src/main.go": "package main\n",
	}
	tree(t, before, start)
	tree(t, ws, start)
	tree(t, ws, map[string]string{".yarn/releases/yarn-4.0.0.cjs": "evil\n", "crate/.cargo/local.toml": "[build]\nrustc-wrapper = \"/x\"\n",
		"team.hgrc": "[hooks]\npre-status = x\n", "src/main.go": "package main // edited\n"})
	m := NewMatcher(Builtin())
	s, _ := ScanWorkspace(before, m, nil)
	var named []string
	named = append(named, s.Named(before, m)...)
	c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: viewFS{ws, before}, Names: m, StartNamed: named})
	for rel, refuse := range map[string]bool{".yarn/releases/yarn-4.0.0.cjs": true, "crate/.cargo/local.toml": true,
		"team.hgrc": true, "src/main.go": false} {
		if v := c.Check(rel, File); (v.Action == Refuse) != refuse {
			t.Errorf("Check(%s) = %v (%s), want refused=%v", rel, v.Action, v.Why, refuse)
		}
	}
}
