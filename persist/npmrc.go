package persist

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A project's .npmrc is read by npm (the nearest directory above the
// working directory with a package.json or node_modules), pnpm 10 and
// Yarn 1 (every ancestor), with the ini package's decoder (ini@6,
// lib/ini.js decode and unsafe): lines split at any run of CR and LF;
// comments; "[section]"; "key = value" where an unquoted key or value
// ends at the first unescaped ";" or "#", and a quoted one is
// JSON-decoded (so a key can be spelled with \u escapes, or be a JSON
// array whose string form is the key). npm expands ${VAR} in keys as well
// as values (@npmcli/config lib/index.js #loadObject), and every setting
// it does not know is still passed to every script it runs as
// npm_config_<key>, where node-gyp reads python, make and nodedir as
// programs (node-gyp lib/node-gyp.js). So a key is harmless only when it
// is one these tools document as a plain setting (npmKnown), and never
// when it names a program, shell, preload or other config file (npmRuns)
// or holds a ${...}.

var (
	// ini@6: /^\[([^\]]*)\]\s*$|^([^=]+)(=(.*))?$/i, with JavaScript's
	// \s and "." (which stops at U+2028 and U+2029).
	iniSection = regexp.MustCompile(`^\[([^\]]*)\][` + jsWS + `]*$`)
	iniKV      = regexp.MustCompile(`^([^=]+)(=([^\x{2028}\x{2029}]*))?$`)
	iniComment = regexp.MustCompile(`^[` + jsWS + `]*[;#]`)
	iniBlank   = regexp.MustCompile(`^[` + jsWS + `]*$`)
	iniLines   = regexp.MustCompile(`[\r\n]+`)
)

// jsWS is JavaScript's \s (and String.prototype.trim's set).
const jsWS = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func jsTrim(s string) string { return strings.TrimFunc(s, jsSpace) }

// iniEntry is one "key = value" of an ini file, in its section ("" at
// the top).
type iniEntry struct {
	section, key, value string
	// sectioned: after a "[section]" line (whose name may be empty);
	// header: the entry is that line itself (its key is empty).
	sectioned, header bool
	// array: the key was written "key[]" (ini collects such values).
	array bool
}

// parseINI decodes b as ini@6 does (it never fails: a line it cannot read
// is skipped). Section names are entries too, with an empty key.
func parseINI(b []byte) []iniEntry {
	s := decodeUTF8(b)
	var out []iniEntry
	section, sectioned := "", false
	for _, line := range iniLines.Split(s, -1) {
		if line == "" || iniComment.MatchString(line) || iniBlank.MatchString(line) {
			continue
		}
		if m := iniSection.FindStringSubmatch(line); m != nil {
			section, sectioned = iniUnsafe(m[1]), true
			out = append(out, iniEntry{section: section, sectioned: true, header: true})
			continue
		}
		m := iniKV.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, array := iniUnsafe(m[1]), false
		if len(key) > 2 && strings.HasSuffix(key, "[]") {
			key, array = key[:len(key)-2], true
		}
		value := "true"
		if m[2] != "" {
			value = iniUnsafe(m[3])
		}
		out = append(out, iniEntry{section: section, sectioned: sectioned, key: key, value: value, array: array})
	}
	return out
}

// decodeUTF8 decodes b as Node's TextDecoder does: each maximal part of
// an invalid sequence becomes one U+FFFD.
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.WriteRune(r)
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += invalidPart(b[i:])
	}
	return sb.String()
}

// invalidPart is the length of the maximal subpart of the invalid UTF-8
// sequence at the start of b (the Unicode standard's "substitution of
// maximal subparts", which TextDecoder follows): a lead byte and the
// continuation bytes that could still have completed it.
func invalidPart(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xbf)
	switch c := b[0]; {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xbf
	}
	return n
}

// iniUnsafe is ini@6's unsafe: trim; a quoted string is JSON-decoded
// (single quotes stripped first); otherwise cut at the first unescaped
// ";" or "#", unescaping "\;", "\#" and "\\".
func iniUnsafe(v string) string {
	v = jsTrim(v)
	if len(v) > 0 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		if v[0] == '\'' {
			if len(v) < 2 {
				v = ""
			} else {
				v = v[1 : len(v)-1]
			}
		}
		var x any
		if json.Unmarshal([]byte(v), &x) == nil {
			return jsString(x)
		}
		return v
	}
	var b strings.Builder
	esc := false
	for _, c := range v {
		switch {
		case esc:
			if c != '\\' && c != ';' && c != '#' {
				b.WriteByte('\\')
			}
			b.WriteRune(c)
			esc = false
		case c == ';' || c == '#':
			return jsTrim(b.String())
		case c == '\\':
			esc = true
		default:
			b.WriteRune(c)
		}
	}
	if esc {
		b.WriteByte('\\')
	}
	return jsTrim(b.String())
}

// jsString is String(x) for a JSON value, as JavaScript turns a property
// key or a value into a string.
func jsString(x any) string {
	switch v := x.(type) {
	case nil:
		return "null"
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e21 {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			if e != nil {
				parts[i] = jsString(e)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// npmrcSettings is the SettingsRule of .npmrc.
func npmrcSettings(b []byte, _ SettingsEnv) ([]Setting, error) {
	var out []Setting
	for _, e := range parseINI(b) {
		key := e.key
		if e.header {
			key = e.section // a section's name is a key whose value is the section
		}
		if why, bad := npmKey(key); bad {
			out = append(out, Setting{Key: key, Value: e.section + "\x00" + e.value, Why: why})
		}
	}
	return out, nil
}

// npmKey says why an .npmrc key is not a plain setting.
func npmKey(key string) (string, bool) {
	if strings.Contains(key, "${") {
		return "npm expands variables in keys, so it can become any setting", true
	}
	k := strings.ReplaceAll(strings.ToLower(key), "_", "-")
	if why, ok := npmRuns[k]; ok {
		return why, true
	}
	switch {
	case strings.HasSuffix(k, "tokenhelper"):
		return "pnpm runs it to get a registry token", true
	case strings.HasPrefix(k, "node-mirror:"):
		return "pnpm downloads Node.js from it and runs scripts with it", true
	case strings.HasPrefix(k, "--"):
		return "Yarn 1 reads it as a command-line flag", true
	case strings.HasPrefix(k, "//"), strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry"):
		return "", false // a registry's address or credentials
	}
	if npmKnown[k] {
		return "", false
	}
	for _, p := range npmKnownPrefixes {
		if strings.HasPrefix(k, p) {
			return "", false
		}
	}
	return "npm passes settings it does not know to every script it runs (npm_config_*), where node-gyp and other tools read programs from them", true
}

// npmRuns are the keys that name a program, shell, preload or config file
// npm, pnpm 10 or Yarn 1 runs or loads, and when (npm's definitions.js,
// pnpm's config types, Yarn 1's getOption keys).
var npmRuns = map[string]string{
	"script-shell":                    "npm, pnpm and Yarn run every script and npx command with this shell",
	"node-options":                    "npm and pnpm pass it to every script as NODE_OPTIONS (--require preloads a file)",
	"userconfig":                      "npm loads another config file from it",
	"globalconfig":                    "npm loads another config file from it",
	"prefix":                          "npm loads <prefix>/etc/npmrc and puts <prefix>/bin on scripts' PATH",
	"init-module":                     "npm init runs it",
	"init.module":                     "npm init runs it (the old name)",
	"git":                             "npm runs it for git dependencies",
	"editor":                          "npm edit and npm config edit run it, and scripts get it as EDITOR",
	"shell":                           "npm explore runs it",
	"browser":                         "npm docs, repo and login run it",
	"viewer":                          "npm help runs it",
	"node-gyp":                        "scripts that build native modules run it",
	"call":                            "npm exec and npx run it",
	"package":                         "npx installs and runs it",
	"cache":                           "npx runs packages from <cache>/_npx",
	"onload-script":                   "npm 6 loads it at start",
	"pnpmfile":                        "pnpm runs it on every command",
	"global-pnpmfile":                 "pnpm runs it on every command",
	"npm-path":                        "pnpm runs it for commands it passes to npm",
	"use-node-version":                "pnpm downloads that Node.js and runs scripts with it",
	"node-version":                    "pnpm runs scripts with that Node.js",
	"yarn-path":                       "Yarn 1 runs it instead of itself on every command",
	"yarnpath":                        "Yarn 1 runs it instead of itself on every command",
	"env":                             "Yarn 1 adds it to every script's environment",
	"plugnplay-shebang":               "Yarn 1 writes it as the interpreter of .pnp.js",
	"python":                          "node-gyp runs it to build native modules",
	"make":                            "node-gyp runs it to build native modules",
	"nodedir":                         "node-gyp includes build files from it",
	"devdir":                          "node-gyp includes build files from it",
	"tarball":                         "node-gyp takes Node.js headers and build files from it",
	"dist-url":                        "node-gyp downloads Node.js headers and build files from it",
	"global":                          "npm runs the global installation's scripts instead",
	"lockfile-dir":                    "moves where pnpm loads .pnpmfile.cjs from",
	"location":                        "npm runs the global installation's scripts instead",
	"unsafe-perm":                     "npm 6 runs scripts as root",
	"manage-package-manager-versions": "pnpm downloads and runs the package manager package.json names",
	"config-dependencies":             "pnpm loads the plugins it names on every command",
	"dangerously-allow-all-builds":    "pnpm runs every dependency's install scripts",
}

// npmKnown are the plain settings of npm 11 (definitions.js), pnpm 10 and
// Yarn 1 that name no program: registries, credentials, proxies, output,
// resolution, lockfile and save options.
var npmKnown = setOf(
	// npm 11 definitions.js, less npmRuns.
	"-auth", "access", "all", "allow-directory", "allow-file", "allow-git", "allow-remote", "allow-same-version",
	"allow-scripts", "allow-scripts-pending", "allow-scripts-pin", "also", "audit", "audit-level", "auth-type",
	"before", "bin-links", "bypass-2fa", "ca", "cache-max", "cache-min", "cafile", "cert", "cidr", "color",
	"commit-hooks", "cpu", "dangerously-allow-all-scripts", "depth", "description", "dev", "diff", "diff-dst-prefix",
	"diff-ignore-all-space", "diff-name-only", "diff-no-prefix", "diff-src-prefix", "diff-text", "diff-unified",
	"dry-run", "engine-strict", "expect-result-count", "expect-results", "expires", "fetch-retries",
	"fetch-retry-factor", "fetch-retry-maxtimeout", "fetch-retry-mintimeout", "fetch-timeout", "force",
	"foreground-scripts", "format-package-lock", "fund", "git-tag-version", "global-style", "heading",
	"https-proxy", "if-present", "ignore-scripts", "include", "include-attestations", "include-staged",
	"include-workspace-root", "init-author-email", "init-author-name", "init-author-url", "init-license",
	"init-private", "init-type", "init-version", "init.author.email", "init.author.name", "init.author.url",
	"init.license", "init.version", "install-links", "install-strategy", "json", "key", "legacy-bundling",
	"legacy-peer-deps", "libc", "link", "local-address", "lockfile-version", "loglevel", "logs-dir", "logs-max",
	"long", "maxsockets", "message", "min-release-age", "min-release-age-exclude", "name", "noproxy", "offline",
	"omit", "omit-lockfile-registry-resolved", "only", "optional", "orgs", "orgs-permission", "os", "otp",
	"pack-destination", "package-lock", "package-lock-only", "packages", "packages-all",
	"packages-and-scopes-permission", "parseable", "password", "prefer-dedupe", "prefer-offline", "prefer-online",
	"preid", "production", "progress", "provenance", "provenance-file", "proxy", "read-only", "rebuild-bundle",
	"registry", "replace-registry-host", "save", "save-bundle", "save-dev", "save-exact", "save-optional",
	"save-peer", "save-prefix", "save-prod", "sbom-format", "sbom-type", "scope", "scopes", "searchexclude",
	"searchlimit", "searchopts", "searchstaleness", "shrinkwrap", "sign-git-commit", "sign-git-tag",
	"strict-allow-scripts", "strict-peer-deps", "strict-ssl", "tag", "tag-version-prefix", "timing",
	"token-description", "umask", "unicode", "update-notifier", "usage", "user-agent", "version", "versions",
	"which", "workspace", "workspaces", "workspaces-update", "yes",
	// Credentials and registry settings npm, pnpm and Yarn read.
	"-authtoken", "-password", "username", "email", "always-auth", "certfile", "keyfile", "http-proxy", "no-proxy",
	// pnpm 10 settings.
	"aggregate-output", "auto-install-peers", "bail", "catalog-mode", "child-concurrency", "ci", "deploy-all-files",
	"disallow-workspace-cycles", "dlx-cache-max-age", "embed-readme", "enable-modules-dir", "enable-pre-post-scripts",
	"exclude-links-from-lockfile", "extend-node-path", "fail-if-no-match", "force-legacy-deploy", "frozen-lockfile",
	"frozen-store", "git-branch-lockfile", "git-checks", "git-shallow-hosts", "hoist", "hoist-pattern",
	"hoist-workspace-packages", "hoisting-limits", "ignore-compatibility-db", "ignore-dep-scripts", "ignore-pnpmfile",
	"init-package-manager", "inject-workspace-packages", "legacy-dir-filtering", "link-workspace-packages", "lockfile",
	"lockfile-include-tarball-url", "lockfile-only", "modules-cache-max-age", "modules-dir",
	"network-concurrency", "node-linker", "npmrc-auth-file", "only-built-dependencies", "only-built-dependencies-file",
	"never-built-dependencies", "optimistic-repeat-install", "pack-gzip-level", "package-import-method",
	"peers-suffix-max-length", "preserve-absolute-paths", "public-hoist-pattern", "publish-branch",
	"recursive-install", "registry-supports-time-field", "resolution-mode", "resolve-peers-from-workspace-root",
	"shared-workspace-lockfile", "shell-emulator", "skip-manifest-obfuscation", "sort", "store-dir", "stream",
	"strict-dep-builds", "strict-peer-dependencies", "strict-store-pkg-content-check", "symlink", "test-pattern",
	"use-beta-cli", "use-lockfile-v6", "use-running-store-server", "use-store-server", "use-stderr",
	"verify-deps-before-run", "verify-store-integrity", "virtual-store-dir", "virtual-store-dir-max-length",
	"virtual-store-only", "workspace-concurrency", "workspace-root", "state-dir", "global-dir", "global-bin-dir",
	"cache-dir", "patches-dir", "block-exotic-subdeps", "trust-lockfile", "sync-injected-deps-after-scripts",
	"dedupe-direct-deps", "dedupe-injected-deps", "dedupe-peer-dependents",
	// Yarn 1 settings it reads from .npmrc too.
	"bin-links", "child-concurrency", "disable-self-update-check", "enable-meta-folder", "ignore-engines",
	"ignore-optional", "ignore-platform", "lastupdatecheck", "network-timeout", "no-progress", "save-exact",
	"version-commit-hooks", "version-git-message", "version-git-tag", "version-sign-git-tag", "version-tag-prefix",
	"yarn-offline-mirror", "yarn-offline-mirror-pruning", "cache-folder", "preferred-cache-folder", "global-folder",
	"offline-cache-folder", "modules-folder", "workspaces-experimental", "workspaces-nohoist-experimental",
)

// npmKnownPrefixes are families of plain pnpm settings.
var npmKnownPrefixes = []string{"fetch-", "filter", "reporter", "package-manager-strict", "merge-git-branch-lockfiles",
	"minimum-release-age", "trust-policy", "side-effects-cache", "prefer-", "save-", "shamefully-", "ignore-workspace",
	"init-"}

func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return m
}

// A Yarn 1 .yarnrc is read with Yarn's lockfile grammar (src/lockfile
// parse.js), and, when that fails, as YAML; it merges both sides of a
// conflict, assigns one value to several comma-separated keys, and takes
// nested blocks. sandboxd reads only the plain form, one "key value" or
// "key: value" per line (a quoted key or value JSON-decoded), and
// refuses anything else: ordinary settings are written that way.

// yarnrcSettings is the SettingsRule of .yarnrc: its keys judged as
// .npmrc's are (Yarn 1 takes a setting from either file).
func yarnrcSettings(b []byte, _ SettingsEnv) ([]Setting, error) {
	s := strings.TrimPrefix(string(b), "\ufeff")
	// Yarn's tokenizer ends a line at CR as well as LF.
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	var out []Setting
	for n, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		key, value, ok := yarnrcLine(line)
		if !ok {
			return nil, fmt.Errorf("line %d is not a plain \"key value\" setting", n+1)
		}
		if why, bad := npmKey(key); bad {
			out = append(out, Setting{Key: key, Value: value, Why: why})
		}
	}
	return out, nil
}

// yarnrcLine reads `key value`, `key: value`, `"key" "value"`: no
// indentation, no comma-separated keys, no conflict markers.
func yarnrcLine(line string) (key, value string, ok bool) {
	if line == "" || line[0] == ' ' || line[0] == '\t' || strings.HasPrefix(line, "<<<<<<<") ||
		strings.HasPrefix(line, "=======") || strings.HasPrefix(line, ">>>>>>>") {
		return "", "", false
	}
	tok := func(s string) (string, string, bool) {
		if strings.HasPrefix(s, `"`) {
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return "", "", false
			}
			var v string
			if json.Unmarshal([]byte(s[:end+1]), &v) != nil {
				return "", "", false
			}
			return v, s[end+1:], true
		}
		i := strings.IndexAny(s, " \t:,\"")
		if i < 0 {
			i = len(s)
		}
		return s[:i], s[i:], i > 0
	}
	key, rest, ok := tok(line)
	if !ok || strings.ContainsAny(key, "{}[]") {
		return "", "", false
	}
	rest = strings.TrimLeft(rest, " \t")
	rest = strings.TrimPrefix(rest, ":")
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, ",") || strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, "[") {
		return "", "", false
	}
	if rest == "" {
		return key, "", true
	}
	if !strings.HasPrefix(rest, `"`) {
		return key, rest, !strings.ContainsAny(rest, `",`)
	}
	value, tail, ok := tok(rest)
	if t := strings.TrimSpace(tail); !ok || t != "" && !strings.HasPrefix(t, "#") {
		return "", "", false
	}
	return key, value, true
}
