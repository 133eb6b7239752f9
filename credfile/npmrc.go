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
	"token": true, "_token": true, "ca": false,
}

// userinfo matches a URL that carries a user (and maybe a password).
var userinfo = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^/\s]*@`)

// Npmrc returns .npmrc data without its credentials: comments, lines
// that are not "key = value", keys that hold a credential (_authToken,
// _auth, _password, username, certfile, ... scoped to a registry or not),
// and values that are URLs with a user or password in them.
func Npmrc(data []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if npmSecret(key) || userinfo.MatchString(value) || strings.ContainsAny(key, "\x00") {
			continue
		}
		out.WriteString(key + "=" + value + "\n")
	}
	return out.Bytes()
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
