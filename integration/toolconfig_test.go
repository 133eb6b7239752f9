package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tool's configuration that names a program it runs on an ordinary
// invocation is persistence (persist/names.go: Settings and Protect
// names). Each case plants one the way an agent could, beside an
// ordinary edit of the same kind of file; after the run the real tool
// runs on the host in the workspace and must run nothing the command
// planted, while the ordinary edit is committed.

// toolCase is one planted configuration.
type toolCase struct {
	name string
	// tool is the program the host runs (skipped when missing).
	tool string
	// plant writes the configuration; MARK is the case's marker, which
	// the planted program touches. It runs in the workspace.
	plant string
	// gone are workspace paths the rules must refuse.
	gone []string
	// keep are workspace paths with content an ordinary edit committed.
	keep map[string]string
	// host runs the tool on the host (in the workspace) after the run.
	host [][]string
	// stdin for the host commands.
	stdin string
	// dir is where the host runs the tool ("" the workspace).
	dir string
	// setup writes what the project held before the run (in its
	// directory, on the host).
	setup map[string]string
	// notLink are workspace paths that must not be symlinks afterwards.
	notLink []string
}

func toolCases() []toolCase {
	evil := func(name string) string {
		return fmt.Sprintf("printf '#!/bin/sh\\ntouch %%s\\nexit 0\\n' MARK > %s && chmod +x %s", name, name)
	}
	return []toolCase{
		{name: "npmrc", tool: "npm",
			plant: evil("evil.sh") + " && printf 'registry=https://registry.example.invalid/\\nscript-shell=%s/evil.sh\\n' \"$PWD\" > .npmrc" +
				" && mkdir -p web && printf 'registry=https://registry.example.invalid/\\nsave-exact=true\\n' > web/.npmrc",
			gone: []string{".npmrc"}, keep: map[string]string{"web/.npmrc": "save-exact=true"},
			host: [][]string{{"npm", "exec", "-c", "true"}, {"npx", "-c", "true"}}},
		{name: "npmrc-spellings", tool: "npm",
			plant: evil("evil.sh") + " && mkdir -p a b c && printf 'script_shell=%s/evil.sh\\n' \"$PWD\" > a/.npmrc" +
				" && printf '\"script\\\\u002dshell\"=%s/evil.sh\\n' \"$PWD\" > b/.npmrc && printf '${SHELLKEY}=%s/evil.sh\\n' \"$PWD\" > c/.npmrc",
			gone: []string{"a/.npmrc", "b/.npmrc", "c/.npmrc"},
			host: [][]string{{"sh", "-c", "cd a && npm exec -c true; cd ../b && npm exec -c true; cd ../c && SHELLKEY=script-shell npm exec -c true"}}},
		{name: "yarnrc-yml", tool: "yarn",
			plant: "mkdir -p .yarn/releases && printf 'require(\"fs\").writeFileSync(\"%s\", \"\")\\n' MARK > .yarn/releases/evil.cjs" +
				" && printf 'yarnPath: .yarn/releases/evil.cjs\\n' > .yarnrc.yml && mkdir -p ok && printf 'nodeLinker: node-modules\\n' > ok/.yarnrc.yml",
			gone: []string{".yarnrc.yml"}, keep: map[string]string{"ok/.yarnrc.yml": "nodeLinker: node-modules"},
			host: [][]string{{"yarn", "--version"}}},
		{name: "yarnrc", tool: "yarn",
			plant: "printf 'require(\"fs\").writeFileSync(\"%s\", \"\")\\n' MARK > evil.js && printf 'yarn-path \"./evil.js\"\\n' > .yarnrc",
			gone:  []string{".yarnrc"}, host: [][]string{{"yarn", "--version"}}},
		{name: "irbrc", tool: "irb",
			plant: "printf 'File.write(\"%s\", \"\")\\n' MARK > .irbrc && cp .irbrc irb.rc",
			gone:  []string{".irbrc", "irb.rc"}, host: [][]string{{"irb", "--noprompt"}}, stdin: "exit\n"},
		{name: "pdbrc", tool: "python3",
			plant: "printf '!import pathlib; pathlib.Path(\"%s\").touch()\\n' MARK > .pdbrc",
			gone:  []string{".pdbrc"}, host: [][]string{{"python3", "-c", "breakpoint()"}}, stdin: "c\n"},
		{name: "hgrc", tool: "hg",
			plant: "hg init lib && printf '[hooks]\\npre-status = touch %s\\n' MARK >> lib/.hg/hgrc" +
				" && hg init ok && printf '[paths]\\ndefault = https://hg.example.invalid/r\\n[ui]\\nusername = x\\n' > ok/.hg/hgrc",
			gone: []string{"lib/.hg/hgrc"}, keep: map[string]string{"ok/.hg/hgrc": "default = https://hg.example.invalid/r"},
			host: [][]string{{"hg", "status"}}, dir: "lib"},
		// What an existing setting names is as protected as the setting
		// (every Yarn 2+ project commits its release and a yarnPath).
		{name: "yarn-release", tool: "yarn",
			setup: map[string]string{".yarnrc.yml": "yarnPath: .yarn/releases/yarn-4.0.0.cjs\n", ".yarn/releases/yarn-4.0.0.cjs": "console.log('4.0.0')\n"},
			plant: "printf 'require(\"fs\").writeFileSync(\"%s\", \"\"); console.log(\"4.0.0\")\\n' MARK > .yarn/releases/yarn-4.0.0.cjs || true",
			host:  [][]string{{"yarn", "--version"}}},
		// A directory the user works in, replaced by a link into a tree
		// whose names are only listed.
		{name: "link-into-node-modules", tool: "npm",
			setup: map[string]string{"web/package.json": "{\"name\": \"web\"}\n"},
			plant: evil("s.sh") + " && mkdir -p node_modules/.web && cp -a web/. node_modules/.web/" +
				" && printf 'script-shell=%s/s.sh\n' \"$PWD\" > node_modules/.web/.npmrc && rm -rf web && ln -s node_modules/.web web",
			notLink: []string{"web"},
			host:    [][]string{{"npm", "exec", "-c", "true"}}, dir: "web"},
		// The forged clone: a new .git with a remote exempts nothing.
		{name: "hgrc-in-forged-clone", tool: "hg",
			plant: "git init -q lib2 && git -C lib2 remote add origin https://example.invalid/r.git && hg init lib2" +
				" && printf '[hooks]\\npre-status = touch %s\\n' MARK >> lib2/.hg/hgrc",
			gone: []string{"lib2/.hg/hgrc"}, host: [][]string{{"hg", "status"}}, dir: "lib2"},
	}
}

// TestToolConfigsRunNothing: in both workspace modes, as root and
// unprivileged, the host's own npm, yarn, irb, pdb and hg run nothing a
// sandboxed command planted in their configuration, and ordinary edits
// to the same files are committed.
func TestToolConfigsRunNothing(t *testing.T) {
	t.Parallel()
	cases := toolCases()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		var script strings.Builder
		marks := map[string]string{}
		for _, c := range cases {
			if toolPath(c.tool) == "" {
				continue
			}
			marks[c.name] = filepath.Join(e.home, "pwned-"+c.name)
			for name, content := range c.setup {
				e.writeFile(filepath.Join(e.ws, c.name, name), content, 0o644)
			}
			fmt.Fprintf(&script, "mkdir -p %s && (cd %s && MARK=%s && %s) || echo PLANT-FAILED %s\n",
				c.name, c.name, marks[c.name], strings.ReplaceAll(c.plant, "MARK", "\"$MARK\""), c.name)
		}
		if len(marks) == 0 {
			t.Skip("skipped: none of npm, yarn, irb, python3, hg is installed (make test installs them)")
		}
		r := e.run(t, script.String())
		if strings.Contains(r.stdout, "PLANT-FAILED") {
			t.Fatalf("planting failed inside (the test would prove nothing)\n%s", r)
		}
		for _, c := range cases {
			mark, ok := marks[c.name]
			if !ok {
				t.Logf("%s: skipped: %s is not installed", c.name, c.tool)
				continue
			}
			root := filepath.Join(e.ws, c.name)
			for _, g := range c.gone {
				if _, err := os.Lstat(filepath.Join(root, g)); err == nil {
					t.Errorf("%s: %s was committed\n%s", c.name, g, r)
				} else if !e.named(r, filepath.Join(c.name, g)) {
					t.Errorf("%s: %s is gone, but neither the report nor stderr says why", c.name, g)
				}
			}
			for _, p := range c.notLink {
				if st, err := os.Lstat(filepath.Join(root, p)); err == nil && st.Mode()&os.ModeSymlink != 0 {
					t.Errorf("%s: the link %s was committed\n%s", c.name, p, r)
				}
			}
			for p, want := range c.keep {
				if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || !strings.Contains(string(b), want) {
					t.Errorf("%s: the ordinary edit %s was not committed: %q %v", c.name, p, b, err)
				}
			}
			for _, args := range c.host {
				e.hostTool2(t, filepath.Join(root, c.dir), c.stdin, args...)
			}
			if _, err := os.Lstat(mark); err == nil {
				t.Errorf("%s: the host's %s ran what the command planted\n%s", c.name, c.tool, r)
			}
		}
		if t.Failed() {
			logRun(t, r)
		}
	})
}

// hostTool2 runs a tool on the host in dir as the env's identity, with
// the env's home and input; its status does not matter (the effect is
// checked).
func (e *env) hostTool2(t *testing.T, dir, stdin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := e.hostCmd(ctx, dir, args[0], args[1:]...)
	cmd.Env = append(cmd.Env, "npm_config_update_notifier=false", "npm_config_cache="+filepath.Join(e.home, ".npm"))
	cmd.Stdin = strings.NewReader(stdin)
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v in %s did not finish: %s", args, dir, out)
	}
	t.Logf("host %v: %s", args, strings.TrimSpace(string(out)))
}

// A rustup toolchain file naming a path and Cargo's rustc wrapper: the
// host's rustup proxies run nothing planted (when rustup is installed for
// the caller: it is per-user, so the unprivileged half checks only that
// the files were refused).
func TestToolchainConfigsRunNothing(t *testing.T) {
	// Serial: it runs root's own cargo in root's real home.
	forModes(t, func(t *testing.T, e *env, layer bool) {
		mark := filepath.Join(e.home, "pwned-rust")
		stub := fmt.Sprintf("mkdir -p tc/bin && printf '#!/bin/sh\\ntouch %s\\n' > tc/bin/cargo && cp tc/bin/cargo tc/bin/rustc && chmod +x tc/bin/*", mark)
		r := e.run(t, stub+" && printf '[toolchain]\\npath = \"%s/tc\"\\n' \"$PWD\" > rust-toolchain.toml && mkdir -p legacy && echo \"$PWD/tc\" > legacy/rust-toolchain"+
			" && mkdir -p ok && printf '[toolchain]\\nchannel = \"stable\"\\n' > ok/rust-toolchain.toml"+
			" && mkdir -p crate/src crate/.cargo && printf '[package]\\nname = \"c\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n' > crate/Cargo.toml && : > crate/src/lib.rs"+
			" && printf '[build]\\nrustc-wrapper = \"%s/tc/bin/rustc\"\\n' \"$PWD\" > crate/.cargo/config.toml"+
			" && mkdir -p ok/.cargo && printf '[build]\\njobs = 2\\n' > ok/.cargo/config.toml")
		e.gone(t, r, "", "rust-toolchain.toml", "legacy/rust-toolchain", "crate/.cargo/config.toml")
		for p, want := range map[string]string{"ok/rust-toolchain.toml": "channel", "ok/.cargo/config.toml": "jobs = 2"} {
			if b, err := os.ReadFile(filepath.Join(e.ws, p)); err != nil || !strings.Contains(string(b), want) {
				t.Errorf("the ordinary edit %s was not committed: %q %v", p, b, err)
			}
		}
		cargo, env := rustupCargo(e)
		if cargo == "" {
			t.Logf("skipped running cargo: no rustup toolchain for %s", e.id.name)
			return
		}
		for _, c := range []struct{ dir, args string }{{".", "--version"}, {"legacy", "--version"}, {"crate", "metadata --format-version 1 --offline"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			cmd := exec.CommandContext(ctx, cargo, strings.Fields(c.args)...)
			cmd.Dir, cmd.Env = filepath.Join(e.ws, c.dir), env
			out, _ := cmd.CombinedOutput()
			cancel()
			t.Logf("host cargo %s in %s: %s", c.args, c.dir, strings.TrimSpace(string(out)))
		}
		if _, err := os.Lstat(mark); err == nil {
			t.Errorf("the host's cargo ran the planted toolchain or wrapper\n%s", r)
		}
		if t.Failed() {
			logRun(t, r)
		}
	})
}

// rustupCargo finds a rustup proxy the env's identity can run (root's
// ~/.cargo/bin, for the root half), and the environment it needs.
func rustupCargo(e *env) (string, []string) {
	if e.id.uid != 0 || os.Geteuid() != 0 {
		return "", nil
	}
	home, _ := os.UserHomeDir()
	cargoHome := os.Getenv("CARGO_HOME")
	if cargoHome == "" {
		cargoHome = filepath.Join(home, ".cargo")
	}
	rustupHome := os.Getenv("RUSTUP_HOME")
	if rustupHome == "" {
		rustupHome = filepath.Join(home, ".rustup")
	}
	cargo := filepath.Join(cargoHome, "bin", "cargo")
	if _, err := os.Stat(filepath.Join(cargoHome, "bin", "rustup")); err != nil {
		return "", nil
	}
	return cargo, []string{"HOME=" + home, "PATH=" + filepath.Join(cargoHome, "bin") + ":/usr/bin:/bin",
		"CARGO_HOME=" + cargoHome, "RUSTUP_HOME=" + rustupHome, "CARGO_TARGET_DIR=" + filepath.Join(e.dir, "target")}
}

// TestSweepReachesLockedGitDirectories: a --no-transaction command that
// plants git metadata that runs a program (core.fsmonitor in a new
// config.worktree, a hook in a new repository) and then locks the git
// directory, or the directory above a new repository, does not keep it:
// the rules read the git directories themselves, so what the command
// locked stays open until they have judged, and its mode is put back.
func TestSweepReachesLockedGitDirectories(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		if out, err := e.gitOut(e.ws, "init", "-q"); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		e.runArgs = []string{"--no-transaction"}
		r := e.run(t, `printf '[core]\n\tfsmonitor = touch /tmp/x\n' > .git/config.worktree && chmod 0 .git
mkdir -p a && git init -q a/sub && printf '#!/bin/sh\n' > a/sub/.git/hooks/post-checkout && chmod 0 a && echo PLANTED`)
		if !strings.Contains(r.stdout, "PLANTED") {
			t.Fatalf("planting failed\n%s", r)
		}
		modes := map[string]os.FileMode{}
		for _, rel := range []string{".git", "a"} {
			if st, err := os.Stat(filepath.Join(e.ws, rel)); err == nil {
				modes[rel] = st.Mode().Perm()
			}
			os.Chmod(filepath.Join(e.ws, rel), 0o755) // to look (as root)
		}
		e.gone(t, r, "", ".git/config.worktree", "a/sub/.git/hooks/post-checkout")
		for _, rel := range []string{".git", "a"} {
			if modes[rel] != 0 {
				t.Errorf("%s is %v after the sweep, want the mode the command left (0) back", rel, modes[rel])
			}
		}
		if t.Failed() {
			logRun(t, r)
		}
	})
}

// TestSweepReachesLockedDirectories: a --no-transaction command that takes
// write (or search) away from its own directories after planting a
// protected name there does not keep it: the sweep gives the owner the
// permission back for the move, and puts the mode back.
func TestSweepReachesLockedDirectories(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.runArgs = []string{"--no-transaction"}
		r := e.run(t, "mkdir -p sub/deep && echo '!import os' > .pdbrc && echo 'script-shell=/tmp/x' > sub/.npmrc && echo '!x' > sub/deep/.pdbrc"+
			" && chmod 0 sub/deep && chmod 555 sub . && echo PLANTED")
		if !strings.Contains(r.stdout, "PLANTED") {
			t.Fatalf("planting failed\n%s", r)
		}
		os.Chmod(filepath.Join(e.ws, "sub", "deep"), 0o755) // to look (as root)
		e.gone(t, r, "", ".pdbrc", "sub/.npmrc", "sub/deep/.pdbrc")
		for rel, want := range map[string]os.FileMode{".": 0o555, "sub": 0o555} {
			if st, err := os.Stat(filepath.Join(e.ws, rel)); err != nil || st.Mode().Perm() != want {
				t.Errorf("%s is %v after the sweep, want its mode %v back", rel, st.Mode().Perm(), want)
			}
		}
		os.Chmod(e.ws, 0o755)
		os.Chmod(filepath.Join(e.ws, "sub"), 0o755)
		if t.Failed() {
			logRun(t, r)
		}
	})
}
