package review

import (
	"regexp"
	"strings"
)

// Values assigned to secret-looking names. A credential has no shape of
// its own when it is a password: "hunter2" looks like any word. What
// gives it away is the name it is assigned to, in a command, a script,
// an .env file or a config: DB_PASSWORD=..., export STRIPE_SECRET=...,
// "api_key": "...", password: ..., --db-password ..., ${PGPASSWORD:-...}.
// The value is hidden whatever it looks like; the name stays, so the
// reviewer still reads what the script does.
//
// A value ends where a shell word ends (unquoted whitespace, a shell
// metacharacter, a command substitution), at its closing quote, or, after
// "NAME: " and "NAME = ", at the end of the line, a " #" comment or what
// looks like the end of an enclosing string or command: the command
// around a secret stays visible (TestRedactHidesNoCommand).
//
// Deliberately not hidden: a value that is only a reference to another
// variable ($PASSWORD, ${TOKEN}, ${{ secrets.X }}, a command
// substitution), which carries no secret; names whose last word says the
// value is about a secret rather than one (PASSWORD_FILE, TOKEN_URL,
// SECRET_NAME, KEY_ID, PASSWORD_MIN_LENGTH, ...); counts (MAX_TOKENS);
// PWD and OLDPWD (the working directory); a bare "key" (a map's key) and
// keys a qualifier makes plain (PUBLIC_KEY, SORT_KEY, PRIMARY_KEY, ...).
// Forms with no name and separator are left to the other patterns:
// .netrc's "password x", XML elements, positional secrets (mysql -pX).
// An unquoted NAME=value is a shell word: in "DB_PASSWORD=x ./deploy.sh"
// the command stays visible, and so would the words after the first of
// an unquoted .env value with blanks (dotenv's "KEY=a b c", which a
// shell sourcing the file would run as a command).

// reAssign finds a name and its separator (on lowered text): an
// identifier-like name, optionally quoted (JSON, YAML, Python dicts) or
// dashed (a flag), then "=", ":", ":=" or "=>" with optional blanks.
// Group 1: dashes; 3: the name; 5: blanks before the separator; 6: the
// separator; 7: blanks after it.
var reAssign = regexp.MustCompile(`(?:^|[^a-z0-9_.$\\-])(-{0,2})(\\?["']?)([a-z_][a-z0-9_.-]*)(\\?["']?)([ \t]*)(:=|=>|=|:)([ \t]*)`)

// reFlagSpace finds a flag whose value is the next word: "--password
// hunter2", "-token x". Group 1: dashes; 2: the name.
var reFlagSpace = regexp.MustCompile(`(?:^|[\s;|&(])(-{1,2})([a-z][a-z0-9_.-]*)[ \t]+`)

// reUserFlag finds curl's and similar tools' user:password flags.
var reUserFlag = regexp.MustCompile(`(?:^|[\s;|&(])(?:-u|-U|--user|--proxy-user)(?:[ \t]+|=)`)

// reReference is a value that only names another variable.
var reReference = regexp.MustCompile(`^(?:\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\}|[0-9@*#?])|\$\{\{[^{}]*\}\})$`)

// assignLiterals are what a secret-looking name contains: text without
// any is not searched.
func assignLiterals() []string {
	return []string{"pass", "pwd", "secret", "token", "credential", "key", "auth", "cookie", "dsn", "conn"}
}

// assignSpans adds the values assigned to secret-looking names in s
// (lower is s with ASCII letters lowered).
func assignSpans(spans []span, s, lower string) []span {
	if containsAny(lower, assignLiterals()...) {
		for _, m := range reAssign.FindAllStringSubmatchIndex(lower, -1) {
			name := s[m[6]:m[7]]
			secret, dsn := secretName(name, m[3] > m[2])
			if !secret && !dsn {
				continue
			}
			a, b := assignedValue(s, m)
			if a >= b || reference(s, a, b) {
				continue
			}
			if !secret {
				// A connection string: only what comes before its host
				// (user:password@); keyword forms (password=...) are
				// names of their own.
				at := strings.LastIndexByte(s[a:b], '@')
				if at <= 0 {
					continue
				}
				b = a + at
			}
			spans = append(spans, span{a, b, kindNamedSecret})
		}
		for _, m := range reFlagSpace.FindAllStringSubmatchIndex(lower, -1) {
			if secret, _ := secretName(s[m[4]:m[5]], true); !secret || m[1] >= len(s) || s[m[1]] == '-' {
				continue
			}
			a, b := wordValue(s, m[1])
			if a < b && !reference(s, a, b) {
				spans = append(spans, span{a, b, kindNamedSecret})
			}
		}
	}
	if strings.Contains(lower, "-u") || strings.Contains(lower, "user") {
		for _, m := range reUserFlag.FindAllStringIndex(lower, -1) {
			a, b := wordValue(s, m[1])
			colon := strings.IndexByte(s[a:b], ':')
			if colon < 0 {
				continue
			}
			a += colon + 1
			// uid:gid (docker -u 1000:1000) is no password.
			if a < b && strings.Trim(s[a:b], "0123456789") != "" && !reference(s, a, b) {
				spans = append(spans, span{a, b, kindNamedSecret})
			}
		}
	}
	return spans
}

// reference reports whether the value s[a:b] only names another
// variable: not when it is single-quoted, where "$x" is literal text.
func reference(s string, a, b int) bool {
	return (a == 0 || s[a-1] != '\'') && reReference.MatchString(s[a:b])
}

// assignedValue returns where the value of reAssign's match m lies in s.
func assignedValue(s string, m []int) (int, int) {
	sep := s[m[12]:m[13]]
	spaced := m[11] > m[10] || m[15] > m[14]
	at := m[15]
	if at >= len(s) {
		return at, at
	}
	switch {
	case startsQuoted(s, at):
		return quotedValue(s, at)
	case sep == ":" && m[6] >= 2 && s[m[6]-2:m[6]] == "${":
		// ${NAME:-default}: the default, to the closing brace.
		if strings.IndexByte("-=+?", s[at]) >= 0 {
			at++
		}
		end := at
		for end < len(s) && s[end] != '}' && s[end] != '\n' {
			end++
		}
		return at, end
	case !spaced && (sep == "=" || sep == ":=" || sep == "=>"):
		return wordValue(s, at)
	case !spaced && sep == ":":
		// name:value with no blank is a word (user:token@host in a
		// URL ends at the "@").
		a, b := wordValue(s, at)
		if i := strings.IndexByte(s[a:b], '@'); i >= 0 {
			b = a + i
		}
		return a, b
	}
	return lineValue(s, at, m[6])
}

// startsQuoted reports a quoted value at s[i]: "...", '...', $'...', or
// a quote escaped as a shell command escapes JSON (\"...\").
func startsQuoted(s string, i int) bool {
	switch {
	case s[i] == '"' || s[i] == '\'':
		return true
	case i+1 < len(s) && (s[i] == '\\' || s[i] == '$') && (s[i+1] == '"' || s[i+1] == '\''):
		return true
	}
	return false
}

// quotedValue returns the inside of the quoted value at s[i], to its
// closing quote on the same line; one that is never closed runs to the
// end of the line.
func quotedValue(s string, i int) (int, int) {
	close, start, escapes := string(s[i]), i+1, s[i] == '"'
	switch {
	case s[i] == '\\':
		close, start, escapes = `\`+string(s[i+1]), i+2, false
	case s[i] == '$':
		close, start, escapes = "'", i+2, true
	}
	for j := start; j < len(s); j++ {
		switch {
		case s[j] == '\n':
			return start, j
		case strings.HasPrefix(s[j:], close):
			return start, j
		case escapes && s[j] == '\\':
			j++
		}
	}
	return start, len(s)
}

// wordValue returns the shell word at s[i]: to unquoted whitespace, a
// metacharacter or a command substitution. A quote inside it that
// looks like the end of an enclosing string (followed by a blank, the
// end or a metacharacter) ends it; any other opens a quoted part.
func wordValue(s string, i int) (int, int) {
	if i < len(s) && startsQuoted(s, i) {
		return quotedValue(s, i)
	}
	j := i
	for j < len(s) {
		c := s[j]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || strings.IndexByte(";|&<>()`", c) >= 0:
			return i, j
		case c == '$' && j+1 < len(s) && s[j+1] == '(':
			return i, j
		case c == '\\':
			j += 2
			continue
		case c == '"' || c == '\'':
			if closesString(s, j+1) {
				return i, j
			}
			k := strings.IndexByte(s[j+1:], c)
			if k < 0 || strings.IndexByte(s[j+1:j+1+k], '\n') >= 0 {
				return i, j
			}
			j += k + 2
			continue
		}
		j++
	}
	return i, min(j, len(s))
}

// closesString reports whether a quote before s[j] looks like the end
// of a string: nothing, a blank or a metacharacter follows.
func closesString(s string, j int) bool {
	return j >= len(s) || strings.IndexByte(" \t\r\n;|&<>)]},", s[j]) >= 0
}

// lineValue returns the value at s[i] that runs to the end of the line
// (YAML's "name: value", INI's "name = value"), short of a " #" comment
// and of what looks like the end of an enclosing string or command, its
// trailing blanks trimmed. A YAML block scalar (| or >) is the lines
// below indented deeper than the name at nameAt.
func lineValue(s string, i, nameAt int) (int, int) {
	if s[i] == '|' || s[i] == '>' {
		eol := i + 1
		for eol < len(s) && strings.IndexByte("+-0123456789", s[eol]) >= 0 {
			eol++
		}
		rest := eol
		for rest < len(s) && (s[rest] == ' ' || s[rest] == '\t') {
			rest++
		}
		if rest == len(s) || s[rest] == '\n' || s[rest] == '\r' || s[rest] == '#' {
			return blockScalar(s, rest, nameAt)
		}
	}
	j := i
loop:
	for j < len(s) {
		c := s[j]
		switch {
		case c == '\n' || c == '\r':
			break loop
		case c == '#' && j > i && (s[j-1] == ' ' || s[j-1] == '\t'):
			break loop
		case strings.IndexByte(";|&<>", c) >= 0 && (j+1 >= len(s) || strings.IndexByte(" \t\r\n;|&<>", s[j+1]) >= 0):
			break loop
		case strings.IndexByte("\"'`", c) >= 0 && closesString(s, j+1):
			break loop
		case c == '$' && j+1 < len(s) && s[j+1] == '(':
			break loop
		}
		j++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return i, j
}

// blockScalar returns the lines after the one s[at] is on, indented
// deeper than the line holding s[nameAt] (blank lines included), up to
// the last of them.
func blockScalar(s string, at, nameAt int) (int, int) {
	lineStart := strings.LastIndexByte(s[:nameAt], '\n') + 1
	indent := 0
	for lineStart+indent < len(s) && (s[lineStart+indent] == ' ' || s[lineStart+indent] == '\t') {
		indent++
	}
	nl := strings.IndexByte(s[at:], '\n')
	if nl < 0 {
		return at, at
	}
	start := at + nl + 1
	end := start
	for p := start; p < len(s); {
		next := strings.IndexByte(s[p:], '\n')
		line := s[p:]
		if next >= 0 {
			line = s[p : p+next]
		}
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed != "" && len(line)-len(trimmed) <= indent {
			break
		}
		if trimmed != "" {
			end = p + len(line)
		}
		if next < 0 {
			break
		}
		p += next + 1
	}
	return start, end
}

// nameWords splits a name into lowered words: at "_", "-" and ".", and
// where camelCase turns (dbPassword, APIKey); digits stay with the word
// before them.
func nameWords(name string) []string {
	var words []string
	cur := []byte{}
	flush := func() {
		if len(cur) > 0 {
			words = append(words, asciiLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == '.':
			flush()
			continue
		case isUpper(c) && i > 0 && (isLower(name[i-1]) || isDigit(name[i-1])):
			flush()
		case isUpper(c) && i > 0 && isUpper(name[i-1]) && i+1 < len(name) && isLower(name[i+1]):
			flush()
		}
		cur = append(cur, c)
	}
	flush()
	return words
}

// secretName reports whether a value assigned to name is a secret, and
// whether name holds a connection string (dsn), whose user:password@
// part is. flag says the name is a command-line flag's (--pass x).
func secretName(name string, flag bool) (secret, dsn bool) {
	ws := nameWords(name)
	if len(ws) == 0 || aboutSecret(ws[len(ws)-1]) || countName(ws[0]) {
		return false, false
	}
	for i, w := range ws {
		if secretWord(ws, i, flag) {
			return true, false
		}
		if strings.HasSuffix(w, "dsn") || w == "connstr" || w == "connectionstring" ||
			(i+1 < len(ws) && (w == "connection" || w == "conn") && (ws[i+1] == "string" || ws[i+1] == "str")) {
			dsn = true
		}
	}
	return false, dsn
}

// secretWord reports whether ws[i] makes the name a secret's.
func secretWord(ws []string, i int, flag bool) bool {
	w, last := ws[i], i == len(ws)-1
	for _, suffix := range []string{"password", "passwd", "passphrase", "secret", "token", "credential", "credentials", "cookie"} {
		if strings.HasSuffix(w, suffix) {
			return true
		}
	}
	switch w {
	case "apikey", "privatekey", "secretkey", "accesskey", "signingkey", "masterkey", "encryptionkey", "licensekey", "sessionkey":
		return true
	case "key":
		return i > 0 && !plainKey(ws[i-1])
	case "auth":
		return last
	case "pwd":
		// PWD alone is the working directory (and --pwd a tool's); MYSQL_PWD
		// is a password.
		return last && i > 0
	case "pass":
		// DB_PASS, and a flag's -pass (openssl); "pass: true" is a result.
		return last && (i > 0 || flag)
	case "passin", "passout":
		return flag
	}
	return false
}

// aboutSecret reports a last word that makes the value something about
// a secret rather than the secret: where it is, what it is called, how
// it is checked.
func aboutSecret(w string) bool {
	switch w {
	case "file", "files", "filename", "path", "paths", "dir", "directory", "folder", "url", "uri", "endpoint",
		"host", "hostname", "port", "stdin", "env", "var", "variable", "name", "names", "id", "ids", "type",
		"kind", "length", "len", "size", "count", "limit", "timeout", "ttl", "expiry", "expires", "expiration",
		"lifetime", "enabled", "enable", "disabled", "disable", "required", "require", "prompt", "policy",
		"cmd", "command", "helper", "method", "mode", "format", "algorithm", "alg", "version", "rotation",
		"sock", "socket", "pid", "user", "username", "login", "hint", "field", "location", "source",
		"provider", "store", "backend", "manager", "template", "pattern", "regex":
		return true
	}
	return false
}

// countName reports a first word that makes the name a number of things
// (MAX_TOKENS, NUM_TOKEN).
func countName(w string) bool { return w == "max" || w == "min" || w == "num" }

// plainKey reports a qualifier that makes "key" a lookup key, not a
// credential.
func plainKey(w string) bool {
	switch w {
	case "public", "pub", "sort", "primary", "foreign", "partition", "cache", "routing", "lookup", "group",
		"map", "object", "idempotency", "dedup", "dedupe", "unique", "composite", "index", "row", "shard",
		"join", "hot", "dict", "hash", "range", "search", "order", "label", "metadata", "attribute", "attr",
		"column", "natural", "surrogate", "candidate", "foreignkey", "sequence":
		return true
	}
	return false
}
