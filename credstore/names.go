package credstore

import (
	"path"
	"strings"
)

// Class is what kind of credential store a name says a file is.
type Class string

// The classes of names.
const (
	History     Class = "history"
	Credentials Class = "credentials"
	Token       Class = "token or auth file"
	PrivateKey  Class = "private key"
	KeyStore    Class = "key store"
	Password    Class = "password file"
	Keyring     Class = "keyring or wallet"
)

// scope is where in the home a name pattern applies.
type scope int

const (
	// anywhere: the name says what the file is wherever it is.
	anywhere scope = iota
	// toolState: a generic name ("token", "auth.json") is a credential
	// store only where tools keep their state: directly in the home,
	// below a directory whose name starts with ".", or in an XDG base
	// directory; a project's own files elsewhere keep such names.
	toolState
)

// namePattern is one rule of the name class.
type namePattern struct {
	glob  string // path.Match on the base name, case-sensitive
	class Class
	scope scope
	// dir: the pattern names a directory, which is a store as a whole;
	// otherwise it names files (and symlinks).
	dir bool
	// sniff: the name is only a candidate; the file is a store when its
	// first bytes are a private key (sniff.go).
	sniff bool
	// parent, when set, must match the parent directory's name.
	parent string
	// code: the pattern also matches source code and documentation
	// (names whose extension says so), which it must not: a project's
	// password_reset.py is not a password file.
	code bool
	// lit is a literal every matching name contains (set by
	// namePatterns).
	lit string
}

// namePatterns is the name class. The names come from the stores the
// tools in stores.go keep and from the signatures secret scanners use
// for the same files (gitrob's core/signatures.go, trufflehog's and
// gitleaks' path rules).
func namePatterns() []namePattern {
	pats := []namePattern{
		// Histories: what was typed, tokens and passwords included.
		{glob: ".*_history", class: History},
		{glob: ".*-history", class: History},
		{glob: ".zhistory", class: History},
		{glob: ".history", class: History},
		{glob: ".histfile", class: History},
		{glob: ".*_hist", class: History},
		{glob: ".lesshst", class: History},
		{glob: ".dbshell", class: History},
		{glob: ".viminfo", class: History},
		{glob: "*_history", class: History, scope: toolState},
		{glob: "history", class: History, scope: toolState},
		{glob: "history.*", class: History, scope: toolState, code: true},
		{glob: "*.shada", class: History, scope: toolState},

		// Credential files by their tools' names.
		{glob: ".netrc", class: Credentials},
		{glob: "_netrc", class: Credentials},
		{glob: ".netrc.gpg", class: Credentials},
		{glob: ".authinfo*", class: Credentials},
		{glob: ".pgpass", class: Credentials},
		{glob: ".my.cnf", class: Credentials},
		{glob: ".mylogin.cnf", class: Credentials},
		{glob: ".git-credentials", class: Credentials},
		{glob: ".pypirc", class: Credentials},
		{glob: ".vault-token", class: Credentials},
		{glob: ".vault_pass*", class: Credentials},
		{glob: ".vault-pass*", class: Credentials},
		{glob: ".s3cfg", class: Credentials},
		{glob: ".boto", class: Credentials},
		{glob: ".dockercfg", class: Credentials},
		{glob: ".sentryclirc", class: Credentials},
		{glob: ".dogrc", class: Credentials},
		{glob: ".databrickscfg", class: Credentials},
		{glob: ".msmtprc", class: Credentials},
		{glob: ".fetchmailrc", class: Credentials},
		{glob: ".credentials", class: Credentials},
		{glob: ".credentials.*", class: Credentials},
		{glob: "*.credentials", class: Credentials},
		{glob: "*.credential", class: Credentials},
		{glob: "kaggle.json", class: Credentials},
		// The AWS console's downloads of a new user's or key's secret.
		{glob: "credentials.csv", class: Credentials},
		{glob: "*accesskeys*.csv", class: Credentials},
		{glob: "*credentials*", class: Credentials, scope: toolState, code: true},
		{glob: "*creds*", class: Credentials, scope: toolState, code: true},

		// Tokens, auth files, secrets and keys by generic names, where
		// tools keep their state.
		{glob: "auth.json", class: Token, scope: toolState},
		{glob: "auth.toml", class: Token, scope: toolState},
		{glob: "auth.yaml", class: Token, scope: toolState},
		{glob: "auth.yml", class: Token, scope: toolState},
		{glob: "*[_\\-]auth.json", class: Token, scope: toolState},
		{glob: "*oauth*", class: Token, scope: toolState, code: true},
		{glob: "token", class: Token, scope: toolState},
		{glob: "tokens", class: Token, scope: toolState},
		{glob: "*.token", class: Token, scope: toolState},
		{glob: "token.json", class: Token, scope: toolState},
		{glob: "tokens.json", class: Token, scope: toolState},
		{glob: "*[_\\-]token", class: Token, scope: toolState},
		{glob: "*[_\\-]token.json", class: Token, scope: toolState},
		{glob: "*[_\\-]tokens", class: Token, scope: toolState},
		{glob: "*[_\\-]tokens.json", class: Token, scope: toolState},
		{glob: "*[_\\-]tokens.db", class: Token, scope: toolState},
		{glob: "secret", class: Token, scope: toolState},
		{glob: "secrets", class: Token, scope: toolState},
		{glob: "secret.*", class: Token, scope: toolState, code: true},
		{glob: "secrets.*", class: Token, scope: toolState, code: true},
		{glob: ".secrets", class: Token, scope: toolState},
		{glob: "*.secret", class: Token, scope: toolState},
		{glob: "*.secrets", class: Token, scope: toolState},
		{glob: "*api[_\\-]key*", class: Token, scope: toolState, code: true},
		{glob: "*apikey*", class: Token, scope: toolState, code: true},
		{glob: "keys.json", class: Token, scope: toolState},
		{glob: "*keypair*.json", class: Token, scope: toolState},
		{glob: ".env", class: Token, scope: toolState},
		{glob: ".env.*", class: Token, scope: toolState, code: true},
		{glob: ".secrets.*", class: Token, scope: toolState},
		{glob: "secrets", class: Token, scope: toolState, dir: true},
		{glob: ".secrets", class: Token, scope: toolState, dir: true},
		{glob: "credentials", class: Credentials, scope: toolState, dir: true},

		// Browsers' saved logins, cookies and the keys that decrypt them,
		// in profiles wherever a package format puts them (snap, Flatpak,
		// a custom profile directory): Firefox's (support.mozilla.org,
		// "Profiles - Where Firefox stores your bookmarks, passwords and
		// other user data") and Chromium's (chromium.googlesource.com,
		// docs/user_data_dir.md; components/os_crypt).
		{glob: "logins.json", class: Credentials, scope: toolState},
		{glob: "logins-backup.json", class: Credentials, scope: toolState},
		{glob: "key3.db", class: Credentials, scope: toolState},
		{glob: "key4.db", class: Credentials, scope: toolState},
		{glob: "signons.sqlite", class: Credentials, scope: toolState},
		{glob: "cookies.sqlite", class: Credentials, scope: toolState},
		{glob: "login data", class: Credentials, scope: toolState},
		{glob: "login data for account", class: Credentials, scope: toolState},
		{glob: "cookies", class: Credentials, scope: toolState},
		{glob: "web data", class: Credentials, scope: toolState},
		{glob: "local state", class: Credentials, scope: toolState},

		// Password files, wherever they are.
		{glob: "*password*", class: Password, code: true},
		{glob: "*passwd*", class: Password, code: true},

		// Private keys: a key-like name whose content is a key.
		{glob: "id_*", class: PrivateKey, sniff: true},
		{glob: "*_rsa", class: PrivateKey, sniff: true},
		{glob: "*_dsa", class: PrivateKey, sniff: true},
		{glob: "*_ecdsa", class: PrivateKey, sniff: true},
		{glob: "*_ed25519", class: PrivateKey, sniff: true},
		{glob: "*_sk", class: PrivateKey, sniff: true},
		{glob: "identity", class: PrivateKey, sniff: true},
		{glob: "*.pem", class: PrivateKey, sniff: true},
		{glob: "*.key", class: PrivateKey, sniff: true},
		{glob: "*.der", class: PrivateKey, sniff: true},
		{glob: "*.p8", class: PrivateKey, sniff: true},
		{glob: "*.pk8", class: PrivateKey, sniff: true},
		{glob: "*.ppk", class: PrivateKey, sniff: true},
		{glob: "*.asc", class: PrivateKey, sniff: true},
		{glob: "*.priv", class: PrivateKey, sniff: true},
		{glob: "*.private", class: PrivateKey, sniff: true},
		{glob: "keys.txt", class: PrivateKey, sniff: true},
		{glob: "adbkey", class: PrivateKey, sniff: true},
		{glob: "*.conf", class: PrivateKey, sniff: true, parent: "wireguard"},

		// Key stores and certificate bundles with keys, by extension.
		{glob: "*.p12", class: KeyStore},
		{glob: "*.pfx", class: KeyStore},
		{glob: "*.pkcs12", class: KeyStore},
		{glob: "*.jks", class: KeyStore},
		{glob: "*.jceks", class: KeyStore},
		{glob: "*.bks", class: KeyStore},
		{glob: "*.keystore", class: KeyStore},
		{glob: "*.keychain", class: KeyStore},
		{glob: "*.keychain-db", class: KeyStore},
		{glob: "*.ovpn", class: KeyStore},

		// Password databases, keyrings and wallets.
		{glob: "*.kdbx", class: Keyring},
		// JetBrains IDEs keep c.kdbx with its master key beside it
		// (jetbrains.com/help/idea/reference-ide-settings-password-safe.html).
		{glob: "c.pwd", class: Keyring, scope: toolState},
		{glob: "*.kdb", class: Keyring},
		{glob: "*.kwl", class: Keyring},
		{glob: "*.psafe3", class: Keyring},
		{glob: "*.keyring", class: Keyring},
		{glob: "wallet.dat", class: Keyring},
		{glob: "*.wallet", class: Keyring},
		{glob: "keyrings", class: Keyring, scope: toolState, dir: true},
		{glob: "kwalletd", class: Keyring, scope: toolState, dir: true},
		{glob: "wallets", class: Keyring, scope: toolState, dir: true},
		{glob: "keystore", class: Keyring, scope: toolState, dir: true},
		{glob: "keystores", class: Keyring, scope: toolState, dir: true},
		{glob: "private-keys-v1.d", class: Keyring, scope: toolState, dir: true},
		{glob: "*.agilekeychain", class: Keyring, dir: true},
		{glob: "*.opvault", class: Keyring, dir: true},
	}
	for i := range pats {
		pats[i].lit = literal(pats[i].glob)
	}
	return pats
}

// notStores are names the patterns catch that are not credential
// stores, each with why.
var notStores = map[string]string{
	// The Android SDK's debug signing key: its password is the
	// documented "android", and every debug build reads it.
	"debug.keystore": "https://developer.android.com/studio/publish/app-signing#debug-mode",
}

// codeExts are extensions of source code and documentation: a
// pattern marked code never matches them.
var codeExts = map[string]bool{
	".go": true, ".py": true, ".pyc": true, ".pyi": true, ".js": true, ".mjs": true, ".cjs": true,
	".ts": true, ".mts": true, ".cts": true, ".tsx": true, ".jsx": true, ".rs": true, ".rb": true,
	".java": true, ".class": true, ".kt": true, ".kts": true, ".scala": true, ".groovy": true,
	".c": true, ".h": true, ".cc": true, ".cpp": true, ".hpp": true, ".cs": true, ".php": true,
	".swift": true, ".m": true, ".lua": true, ".pl": true, ".pm": true, ".ex": true, ".exs": true,
	".erl": true, ".hs": true, ".ml": true, ".clj": true, ".dart": true, ".vue": true, ".svelte": true,
	".sh": true, ".bash": true, ".zsh": true, ".fish": true, ".ps1": true, ".el": true, ".vim": true,
	".md": true, ".rst": true, ".adoc": true, ".html": true, ".htm": true, ".css": true, ".scss": true,
	".map": true, ".svg": true, ".png": true, ".jpg": true, ".gif": true, ".po": true, ".mo": true,
	".example": true, ".sample": true, ".template": true, ".dist": true, ".tmpl": true,
	// Build artifacts: google-auth-library-credentials-1.0.jar is a
	// library in a Gradle or Maven cache.
	".jar": true, ".war": true, ".aar": true, ".pom": true, ".module": true, ".whl": true,
	".egg": true, ".gem": true, ".crate": true, ".nupkg": true, ".so": true, ".a": true,
	".o": true, ".dll": true, ".exe": true, ".sha1": true, ".sha256": true, ".sha512": true,
	".md5": true, ".lock": true,
}

// nameMatch says whether a name is a credential store's.
type nameMatch struct {
	class Class
	sniff bool
}

// backupSuffixes are what editors and people add to a file's name for
// a copy of it beside it: the copy holds what the file holds.
var backupSuffixes = []string{"~", ".bak", ".backup", ".old", ".orig", ".save", ".swp", ".swo", ".tmp", ".dpkg-old", ".rpmsave"}

// backupOf returns the name a backup's name is a copy of (suffixes as
// editors write them, in lower case): "x~",
// "x.bak" (and the other suffixes), Emacs's "#x#", and Vim's swap
// file ".x.swp" of a visible name.
func backupOf(name string) (string, bool) {
	if len(name) > 2 && strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#") {
		return name[1 : len(name)-1], true
	}
	for _, suf := range backupSuffixes {
		if len(name) > len(suf) && strings.HasSuffix(name, suf) {
			orig := name[:len(name)-len(suf)]
			if (suf == ".swp" || suf == ".swo") && strings.HasPrefix(orig, ".") && !strings.HasPrefix(orig, "..") && len(orig) > 1 {
				if visible := orig[1:]; !strings.HasPrefix(visible, ".") {
					return visible, true // Vim's swap of a visible file
				}
			}
			return orig, true
		}
	}
	return "", false
}

// matchName matches one directory entry: its name (in any case, or a
// backup of a name that matches), whether it is a directory, its parent
// directory's name, and whether it lies where tools keep their state.
func matchName(name string, isDir bool, parent string, inToolState bool, pats []namePattern) (nameMatch, bool) {
	lower, lowerParent := strings.ToLower(name), strings.ToLower(parent)
	if m, ok := matchOne(lower, isDir, lowerParent, inToolState, pats); ok {
		return m, true
	}
	if orig, ok := backupOf(lower); ok && orig != "" {
		return matchOne(orig, isDir, lowerParent, inToolState, pats)
	}
	return nameMatch{}, false
}

// matchOne matches a lower-case name.
func matchOne(name string, isDir bool, parent string, inToolState bool, pats []namePattern) (nameMatch, bool) {
	if _, ok := notStores[name]; ok {
		return nameMatch{}, false
	}
	ext := path.Ext(name)
	if strings.HasSuffix(name, ".pub") {
		return nameMatch{}, false // the public half of a key pair
	}
	isCode := codeExts[ext]
	for _, p := range pats {
		if p.dir != isDir || (p.scope == toolState && !inToolState) || (p.code && isCode) {
			continue
		}
		if !strings.Contains(name, p.lit) {
			continue // the cheap test first: most names share nothing with a pattern
		}
		if ok, _ := path.Match(p.glob, name); !ok {
			continue
		}
		if p.parent != "" {
			if ok, _ := path.Match(p.parent, parent); !ok {
				continue
			}
		}
		return nameMatch{class: p.class, sniff: p.sniff}, true
	}
	return nameMatch{}, false
}

// literal is the longest run of glob without a pattern character: a
// name the glob matches contains it.
func literal(glob string) string {
	best := ""
	for _, part := range strings.FieldsFunc(glob, func(r rune) bool { return r == '*' || r == '?' }) {
		for part != "" {
			lit, rest, _ := strings.Cut(part, "[")
			if len(lit) > len(best) {
				best = lit
			}
			_, part, _ = strings.Cut(rest, "]")
		}
	}
	return best
}
