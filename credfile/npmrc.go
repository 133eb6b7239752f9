package credfile

import (
	"bytes"
	"regexp"
	"strings"
)

// npmSecretKeys are .npmrc keys (alone or after a "//host/path/:" scope)
// that hold or point to a credential.
var npmSecretKeys = map[string]bool{
	"_auth": true, "_authtoken": true, "_password": true, "password": true, "username": true,
	"email": true, "certfile": true, "keyfile": true, "cert": true, "key": true, "otp": true,
	"token": true, "_token": true,
}

// userinfo matches a URL that carries a user (and maybe a password).
var userinfo = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^/\s]*@`)

// plainKey matches the keys kept: npm's ini reader also unquotes keys,
// decodes JSON escapes in double-quoted ones, undoes backslash escapes
// and expands ${VARS} in them, so any key that could mean something
// other than what it spells is dropped.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.:/@+-]+$`)

// Npmrc returns .npmrc data without its credentials. It fails closed:
// it keeps only "key = value" lines whose key is plain (letters, digits
// and _.:/@+-, so it means what it spells) and names no credential
// (_authToken, _auth, _password, username, certfile, ... scoped to a
// registry or not, or anything with token, auth, passw or secret in it),
// and whose value is not a URL with a user in it nor mentions a token.
// Lines are split as npm's ini reader splits them: on any run of CR and
// LF. Comments are dropped.
func Npmrc(data []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.FieldsFunc(string(data), func(r rune) bool { return r == '\r' || r == '\n' }) {
		t := strings.TrimSpace(strings.TrimPrefix(line, "\ufeff"))
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !plainKey.MatchString(key) || npmSecret(key) || secretValue(value) {
			continue
		}
		out.WriteString(key + "=" + value + "\n")
	}
	return out.Bytes()
}

// secretValue reports whether a value carries a credential: a URL with
// a user in it, or a token or password in a query string or anywhere.
func secretValue(v string) bool {
	l := strings.ToLower(v)
	return userinfo.MatchString(v) || strings.Contains(l, "token") || strings.Contains(l, "auth") ||
		strings.Contains(l, "passw") || strings.Contains(l, "secret") || strings.ContainsAny(v, "\x00\r\n")
}

// npmSecret reports whether an .npmrc key names a credential, scoped
// ("//registry.example/:_authToken") or not, in any case, as an array
// entry ("key[]") too.
func npmSecret(key string) bool {
	k := strings.ToLower(strings.TrimSuffix(key, "[]"))
	if i := strings.LastIndex(k, ":"); i >= 0 && strings.HasPrefix(k, "//") {
		k = k[i+1:]
	} else if strings.HasPrefix(k, "//") {
		return true // a scoped key without its name: keep nothing odd
	}
	if npmSecretKeys[k] {
		return true
	}
	// Other spellings of a token.
	return strings.Contains(k, "token") || strings.Contains(k, "auth") || strings.Contains(k, "passw") || strings.Contains(k, "secret")
}
