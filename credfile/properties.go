package credfile

import (
	"bytes"
	"regexp"
	"strings"
)

// propertyKey matches the keys kept: plain, so the key means what it
// spells (java.util.Properties undoes backslash and \uXXXX escapes in
// keys).
var propertyKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// GradleProperties returns gradle.properties data without its
// credentials. It reads logical lines as java.util.Properties does
// (natural lines end at LF, CR or CRLF; a line ending in an odd number
// of backslashes continues on the next, whose leading blanks are
// skipped; a comment line starts with # or ! and never continues) and
// keeps only "key=value" or "key: value" entries whose key is plain
// and names no credential (password, secret, token, auth, key, user,
// credential and their spellings: mavenCentralPassword,
// signing.keyId, systemProp.https.proxyUser, ...) and whose value is
// not a URL with a user in it nor mentions a token or password.
// Comments are dropped; a continued entry is written on one line.
func GradleProperties(data []byte) []byte {
	var out bytes.Buffer
	for _, line := range propertiesLines(string(data)) {
		t := strings.TrimLeft(line, " \t\f")
		sep := strings.IndexAny(t, "=:")
		if sep <= 0 {
			continue
		}
		key, value := strings.TrimRight(t[:sep], " \t\f"), strings.TrimLeft(t[sep+1:], " \t\f")
		if !propertyKey.MatchString(key) || propertySecret(key) || secretValue(value) {
			continue
		}
		out.WriteString(key + "=" + value + "\n")
	}
	return out.Bytes()
}

// propertiesLines splits data into logical lines, comments and blank
// lines left out.
func propertiesLines(data string) []string {
	var lines []string
	var cur strings.Builder
	continuing := false
	for len(data) > 0 {
		i := strings.IndexAny(data, "\r\n")
		var natural string
		if i < 0 {
			natural, data = data, ""
		} else {
			natural = data[:i]
			if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			data = data[i+1:]
		}
		t := strings.TrimLeft(natural, " \t\f")
		if !continuing && (t == "" || t[0] == '#' || t[0] == '!') {
			continue
		}
		odd := trailingBackslashes(t)%2 == 1
		if odd {
			t = t[:len(t)-1]
		}
		cur.WriteString(t)
		continuing = odd
		if !continuing {
			lines = append(lines, cur.String())
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

func trailingBackslashes(s string) int {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '\\' {
		n++
	}
	return n
}

// propertySecret reports whether a property key names a credential.
func propertySecret(key string) bool {
	k := strings.ToLower(key)
	for _, w := range []string{"passw", "pwd", "secret", "token", "auth", "key", "user", "cred", "login", "signing"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
