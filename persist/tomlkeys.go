package persist

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// TOML settings files (rustup's rust-toolchain.toml, Cargo's
// .cargo/config.toml, Bun's bunfig.toml, uv's uv.toml) are read with
// go-toml, which like the tools' own parsers refuses a repeated key and
// decodes escapes in quoted keys; every leaf is named by its dotted path
// ("build.rustc-wrapper", "target.x86_64-unknown-linux-gnu.runner").

// tomlLeaf is one value of a TOML document and its path.
type tomlLeaf struct {
	path  []string
	value string
}

func tomlLeaves(b []byte) ([]tomlLeaf, error) {
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		return nil, syntaxError("TOML", err)
	}
	var out []tomlLeaf
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(append(append([]string(nil), path...), k), x[k])
			}
			if len(x) == 0 {
				out = append(out, tomlLeaf{path, "{}"})
			}
		default:
			out = append(out, tomlLeaf{path, fmt.Sprintf("%#v", v)})
		}
	}
	walk(nil, doc)
	return out, nil
}

// tomlSettings makes a SettingsRule from a judge of dotted key paths.
func tomlSettings(judge func(path []string, value string) (string, bool)) SettingsRule {
	return func(b []byte, _ SettingsEnv) ([]Setting, error) {
		leaves, err := tomlLeaves(b)
		if err != nil {
			return nil, err
		}
		var out []Setting
		for _, l := range leaves {
			if why, bad := judge(l.path, l.value); bad {
				out = append(out, Setting{Key: strings.Join(l.path, "."), Value: l.value, Why: why})
			}
		}
		return out, nil
	}
}

// rustToolchainTOML: rustup runs <path>/bin/cargo and rustc for every
// cargo, rustc and rustup command below a toolchain file naming a path
// (rustup src/config.rs OverrideFile; `path` must be absolute).
var rustToolchainTOML = tomlSettings(func(p []string, _ string) (string, bool) {
	if len(p) >= 2 && p[0] == "toolchain" && p[1] == "path" {
		return "rustup runs the cargo and rustc in that directory for every cargo, rustc and rustup command here", true
	}
	return "", false
})

// rustChannel is a legacy rust-toolchain line rustup reads as a channel
// or toolchain name (an absolute path is a toolchain directory).
var rustChannel = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

// rustToolchain is the SettingsRule of a rust-toolchain file: one line is
// a channel (or, when absolute, a toolchain directory), more is TOML
// (rustup src/config.rs parse_override_file counts lines).
func rustToolchain(b []byte, env SettingsEnv) ([]Setting, error) {
	s := string(b)
	if strings.Count(strings.TrimRight(s, "\n"), "\n") == 0 && !strings.Contains(strings.TrimRight(s, "\r\n"), "\r") {
		line := strings.TrimSpace(s)
		if line == "" || rustChannel.MatchString(line) {
			return nil, nil
		}
		return []Setting{{Key: "toolchain", Value: line, Why: "rustup runs the cargo and rustc of a toolchain directory named here for every cargo, rustc and rustup command"}}, nil
	}
	return rustToolchainTOML(b, env)
}

// cargoConfig: Cargo's configuration (cwd and every ancestor's
// .cargo/config.toml; doc/book/src/reference/config.md). The keys that
// run a program or load code: rustc and its wrappers (run by cargo
// metadata, tree and fetch, and so by editors opening the folder),
// rustdoc, linkers and runners, [env] (LD_PRELOAD for every rustc),
// [alias] (which can take over cargo fmt or clippy), include (more
// config), credential providers, the doc browser, [unstable], and
// rustflags that name a linker or load a codegen backend or plugin.
var cargoConfig = tomlSettings(func(p []string, v string) (string, bool) {
	if len(p) == 0 {
		return "", false
	}
	last := p[len(p)-1]
	switch {
	case p[0] == "build" && len(p) == 2 && (last == "rustc" || last == "rustc-wrapper" || last == "rustc-workspace-wrapper" || last == "rustdoc"):
		return "cargo runs it for every build and for cargo metadata, tree and fetch", true
	case (p[0] == "target" || p[0] == "host") && (last == "linker" || last == "runner"):
		return "cargo runs it to link or to run what it built", true
	case p[0] == "target" && len(p) >= 3 && (strings.Contains(last, "link-arg") || strings.Contains(last, "rustc-flags") || strings.Contains(last, "rustc-link")):
		return "it passes flags to the linker in place of a build script", true
	case p[0] == "env":
		return "cargo sets it for every rustc and build script (LD_PRELOAD among them)", true
	case p[0] == "alias":
		return "an alias can take over a cargo subcommand such as fmt or clippy", true
	case p[0] == "include":
		return "cargo loads more configuration from it", true
	case last == "credential-provider" || last == "global-credential-providers" || p[0] == "credential-alias":
		return "cargo runs it to get registry credentials", true
	case p[0] == "doc" && last == "browser":
		return "cargo doc --open runs it", true
	case p[0] == "unstable":
		return "it turns on unstable features that load code", true
	case last == "rustflags" || last == "rustdocflags":
		for _, f := range []string{"linker", "link-arg", "codegen-backend", "llvm-plugins", "-Z", "--extern", "-L"} {
			if strings.Contains(v, f) {
				return "rustc flags that name a linker or load code", true
			}
		}
		if strings.Contains(v, "@") {
			return "rustc reads more flags from an @file", true
		}
	}
	return "", false
})

// bunfig: Bun's bunfig.toml in the working directory (bun.com/docs
// runtime/bunfig; src/bunfig.zig).
var bunfig = tomlSettings(func(p []string, _ string) (string, bool) {
	k := strings.Join(p, ".")
	switch {
	case k == "preload" || strings.HasPrefix(k, "preload."):
		return "bun runs it before every file it runs", true
	case strings.HasPrefix(k, "test.preload"):
		return "bun test runs it first", true
	case strings.HasPrefix(k, "serve.static.plugins"):
		return "bun loads these bundler plugins", true
	case strings.HasPrefix(k, "install.security.scanner"):
		return "bun install loads it", true
	case k == "debug.editor":
		return "bun opens files with it", true
	case k == "macros" || strings.HasPrefix(k, "macros."):
		return "macros run at bundle time", true
	case k == "run.bun":
		return "bun runs scripts' node with itself", true
	}
	return "", false
})

// uvTOML: uv's uv.toml (cwd and ancestors; uv-settings): an interpreter
// path, and the mirrors and lists it downloads interpreters from and runs.
var uvTOML = tomlSettings(func(p []string, _ string) (string, bool) {
	k := strings.Join(p, ".")
	switch {
	case k == "pip.python" || k == "python":
		return "uv runs that interpreter", true
	case k == "python-install-mirror" || k == "pypy-install-mirror" || k == "python-downloads-json-url":
		return "uv downloads interpreters from it and runs them", true
	case k == "keyring-provider":
		return "uv runs keyring for credentials", true
	case k == "cache-dir":
		return "uv runs what it finds in that cache", true
	}
	return "", false
})

// versionPin is the SettingsRule of a version file whose value a version
// manager turns into a path under its own directory without refusing
// ".." (rbenv before 1.2, jenv, tfenv, sdkman) or reads as an interpreter
// path (uv's .python-version): a value with a path in it names a program
// anywhere.
func versionPin(b []byte, _ SettingsEnv) ([]Setting, error) {
	var out []Setting
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, `/\`) || strings.Contains(line, "..") || strings.HasPrefix(line, "~") || strings.HasPrefix(line, ".") {
			out = append(out, Setting{Key: "version", Value: line, Why: "a version that is a path runs the program there"})
		}
	}
	return out, nil
}

// bazelVersion is the SettingsRule of .bazelversion: bazelisk runs an
// absolute path as Bazel, and downloads a "fork/version" from that fork's
// GitHub releases (bazelisk core.go).
var bazelLabel = regexp.MustCompile(`^[0-9A-Za-z._-]+$`)

func bazelVersion(b []byte, _ SettingsEnv) ([]Setting, error) {
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" || bazelLabel.MatchString(line) {
		return nil, nil
	}
	return []Setting{{Key: "version", Value: line, Why: "bazelisk runs a path, or a fork's release, as Bazel on every command"}}, nil
}

// toolVersions is the SettingsRule of .tool-versions: asdf and mise run
// the programs of a "path:" version.
func toolVersions(b []byte, _ SettingsEnv) ([]Setting, error) {
	var out []Setting
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		for _, v := range f[min(1, len(f)):] {
			if strings.HasPrefix(v, "path:") {
				out = append(out, Setting{Key: f[0], Value: v, Why: "asdf and mise run that directory's programs"})
			}
		}
	}
	return out, nil
}

// bazelrc is the SettingsRule of .bazelrc: lines that start Bazel's
// server with other options or JVM, import other files, or name a
// program a build runs (bazel.build/run/bazelrc).
func bazelrc(b []byte, _ SettingsEnv) ([]Setting, error) {
	var out []Setting
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		first, _, _ := strings.Cut(t, " ")
		cmd, _, _ := strings.Cut(first, ":")
		switch {
		case cmd == "startup":
			out = append(out, Setting{Key: first, Value: t, Why: "Bazel starts its server with these options"})
			continue
		case strings.HasPrefix(cmd, "import") || strings.HasPrefix(cmd, "try-import"):
			out = append(out, Setting{Key: first, Value: t, Why: "Bazel reads another file's options"})
			continue
		}
		for _, f := range []string{"--server_javabase", "--host_jvm_args", "--host_javabase", "--workspace_status_command",
			"--run_under", "--credential_helper", "--override_repository", "--registry", "--output_base", "--install_base"} {
			if strings.Contains(t, f) {
				out = append(out, Setting{Key: f, Value: t, Why: "Bazel runs a program or code it names"})
				break
			}
		}
	}
	return out, nil
}

// bundleConfig is the SettingsRule of Bundler's .bundle/config: the
// Gemfile it evaluates, gems taken from local checkouts, build flags,
// plugins and where it takes more configuration. Bundler reads the file
// line by line (bundler/yaml_serializer.rb: any line "KEY: value", at
// any indentation, where ":" is followed by a space or the end), not as
// YAML; every key such a line could be read as is judged.
func bundleConfig(b []byte, _ SettingsEnv) ([]Setting, error) {
	var out []Setting
	for _, line := range strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' || r == '\r' }) {
		for i := 0; i < len(line); i++ {
			if line[i] != ':' || i+1 < len(line) && line[i+1] != ' ' && line[i+1] != '\t' {
				continue
			}
			key := strings.ToUpper(strings.Trim(strings.TrimSpace(line[:i]), `"'-`))
			key = strings.NewReplacer(".", "__", "-", "___").Replace(key)
			switch {
			case strings.Contains(key, "GEMFILE"), strings.Contains(key, "APP_CONFIG"), strings.Contains(key, "PLUGINS"),
				strings.Contains(key, "LOCAL__"), strings.Contains(key, "BUILD__"):
				out = append(out, Setting{Key: key, Value: line, Why: "Bundler evaluates or builds code it names"})
			}
		}
	}
	return out, nil
}
