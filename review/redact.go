package review

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// secretKind names what a redaction hid. The order is a priority: when
// two findings overlap they become one marker named after the first kind.
type secretKind uint8

const (
	kindEnvSecret secretKind = iota
	kindPrivateKey
	kindGCPServiceKey
	kindAWSSecret
	kindBasicAuth
	kindBearer
	kindURLUserinfo
	kindURLSecret
	kindOpenAI
	kindGitHub
	kindAWSKeyID
	kindGCP
	kindSlack
	kindJWT
	kindNamedSecret
	kindHighEntropy
	kindUnsettled
	numKinds
)

// String is the kind's name inside a marker.
func (k secretKind) String() string {
	switch k {
	case kindEnvSecret:
		return "env-secret"
	case kindPrivateKey:
		return "private-key"
	case kindGCPServiceKey, kindGCP:
		return "gcp-key"
	case kindAWSSecret, kindAWSKeyID:
		return "aws-key"
	case kindBasicAuth:
		return "basic-auth"
	case kindBearer:
		return "bearer"
	case kindURLUserinfo:
		return "url-userinfo"
	case kindURLSecret:
		return "url-secret"
	case kindOpenAI:
		return "openai-key"
	case kindGitHub:
		return "github-token"
	case kindSlack:
		return "slack-token"
	case kindJWT:
		return "jwt"
	case kindNamedSecret:
		return "named-secret"
	case kindHighEntropy:
		return "high-entropy"
	}
	return "unsettled"
}

// markerPrefix starts every marker: "[REDACTED:kind]". Brackets and the
// colon are not token characters, so a marker never joins the text
// around it into something that looks like a secret.
const markerPrefix = "[REDACTED:"

func marker(k secretKind) string { return markerPrefix + k.String() + "]" }

// Redactor removes secrets from text before it is shown to a model
// reviewer (or logged): the reviewer needs to see what a command does,
// never the credentials it carries. It finds well-known credential shapes
// (PEM private keys, Authorization headers, provider tokens, JWTs, URL
// userinfo and secret-looking query parameters, long high-entropy
// tokens), the values assigned to secret-looking names (DB_PASSWORD=...,
// "api_key": "...", --password ...: see assign.go), and the exact values
// of the environment variables the policy treats as secret, also URL-,
// hex- and base64-encoded. Each finding
// becomes a fixed marker, [REDACTED:kind]. A Redactor is immutable and
// safe for concurrent use.
//
// What is deliberately kept: 40-hex-digit runs (git commit SHAs; a 41st
// hex digit makes it a redaction, which also hides sha256 digests, the
// safe side), UUIDs, ordinary paths and identifiers, and tokens that are
// long but all one case or have no digit (paths, module names,
// identifiers). Shorter secrets than these shapes are caught only when
// they are one of the configured values.
type Redactor struct {
	// secrets replaces the configured values and their encodings, longest
	// first; nil when there are none.
	secrets *strings.Replacer
}

// minSecretLen is the shortest configured value that is redacted: a
// shorter one would hide ordinary words and numbers all over the text.
const minSecretLen = 8

// NewRedactor returns a Redactor that also hides each of secretValues
// (the values of environment variables the policy marks secret). Values
// shorter than 8 bytes are ignored, as are values that occur inside a
// marker, which could never be hidden by one.
func NewRedactor(secretValues []string) *Redactor {
	var olds []string
	for _, v := range secretValues {
		if len(v) < minSecretLen {
			continue
		}
		for _, form := range secretForms(v) {
			if !inMarker(form) {
				olds = append(olds, form)
			}
		}
	}
	if len(olds) == 0 {
		return &Redactor{}
	}
	// Longest first: strings.Replacer prefers earlier arguments at the
	// same position, so a value that contains another is hidden whole.
	slices.SortFunc(olds, func(a, b string) int { return len(b) - len(a) })
	olds = slices.Compact(olds)
	pairs := make([]string, 0, 2*len(olds))
	for _, o := range olds {
		pairs = append(pairs, o, marker(kindEnvSecret))
	}
	return &Redactor{secrets: strings.NewReplacer(pairs...)}
}

// secretForms is v as it may appear in text: raw, with invalid UTF-8
// replaced (as Redact does), URL-escaped, hex, and base64 in both
// alphabets at each of the three byte alignments it can have inside a
// longer encoded blob (the characters that depend only on v).
func secretForms(v string) []string {
	forms := []string{v, strings.ToValidUTF8(v, "\uFFFD"), url.QueryEscape(v), url.PathEscape(v),
		hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v)))}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := range 3 {
			buf := make([]byte, k+len(v))
			copy(buf[k:], v)
			e := enc.EncodeToString(buf)
			// Character i carries bits [6i, 6i+6); v's bits are [8k, 8(k+n)).
			from, to := (8*k+5)/6, 8*(k+len(v))/6
			forms = append(forms, e[from:to])
		}
	}
	return forms
}

// inMarker reports whether s occurs inside some marker.
func inMarker(s string) bool {
	for k := range numKinds {
		if strings.Contains(marker(k), s) {
			return true
		}
	}
	return false
}

// maxRedactPasses bounds Redact's search for a fixed point.
const maxRedactPasses = 4

// Redact returns s with every secret it finds replaced by a marker. The
// result is valid UTF-8, and Redact(Redact(s)) == Redact(s): Redact
// repeats its pass until the text no longer changes (clean text costs one
// pass, text with secrets usually two). Should that not settle, the whole
// text is replaced: hiding too much is the safe failure.
func (r *Redactor) Redact(s string) string {
	for range maxRedactPasses {
		out := r.pass(s)
		if out == s {
			return out
		}
		s = out
	}
	return marker(kindUnsettled)
}

// pass redacts s once: the configured values first (so no pattern can
// split one and leave pieces), then every pattern over the same text,
// their findings merged and replaced in one go.
func (r *Redactor) pass(s string) string {
	if r != nil && r.secrets != nil {
		s = r.secrets.Replace(s)
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	spans := patternSpans(nil, s)
	spans = tokenSpans(spans, s)
	return applySpans(s, spans)
}

// span is a finding: s[start:end] is a secret of kind k.
type span struct {
	start, end int
	k          secretKind
}

// applySpans replaces the spans in s, merging overlapping ones. A span
// that covers only markers already is left alone, so a second pass finds
// nothing new.
func applySpans(s string, spans []span) string {
	spans = slices.DeleteFunc(spans, func(sp span) bool { return sp.start >= sp.end || onlyMarkers(s[sp.start:sp.end]) })
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
			cur.k = min(cur.k, spans[i].k)
		}
		b.WriteString(s[last:cur.start])
		b.WriteString(marker(cur.k))
		last = cur.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// onlyMarkers reports whether t is nothing but markers.
func onlyMarkers(t string) bool {
	for t != "" {
		if !strings.HasPrefix(t, markerPrefix) {
			return false
		}
		j := strings.IndexByte(t, ']')
		if j < 0 || !kindName(t[len(markerPrefix):j]) {
			return false
		}
		t = t[j+1:]
	}
	return true
}

func kindName(name string) bool {
	for k := range numKinds {
		if k.String() == name {
			return true
		}
	}
	return false
}

// The patterns. Those that ignore case run on an ASCII-lowered copy of
// the text, whose byte offsets are the original's. Each is RE2 (linear
// time) and is only run when a literal it needs is present.
//
// A match never runs on past what a secret could contain: the text the
// reviewer must judge (a shell command after the credential, the rest of
// a script after a line that merely names a PEM header) stays visible.
// Values stop at whitespace, quotes and shell metacharacters.
var (
	// The key body: base64, whitespace (also as \n escapes in JSON),
	// and RFC 1421 headers (Proc-Type: 4,ENCRYPTED); a truncated key is
	// hidden to where its body ends, a named header alone is hidden alone.
	rePEM = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----(?:[A-Za-z0-9+/=\s:,.]|\\[nr]|-[A-Za-z0-9])*(?:-----END[A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*-----)?`)
	// A service-account key's "private_key" value, also with the quotes
	// escaped as in a shell command.
	reGCPPrivateKey = regexp.MustCompile(`\\?"private_key\\?"\s*:\s*\\?"((?:[^"\\]|\\[^"])*)`)
	// On lowered text from here on. A header's credentials are one token
	// after the scheme; a cookie header's are its name=value pairs.
	reAuthHeader = regexp.MustCompile(`authorization["']?\s*[:=]\s*["']?(?:([a-z][a-z0-9-]*)\s+)?([^\s"'\x60\\;|&<>()]+)`)
	reCredHeader = regexp.MustCompile(`(?:x-api-key|api-key|x-auth-token|private-token)["']?\s*:\s*["']?([^\s"'\x60\\;|&<>()]+)`)
	reCookie     = regexp.MustCompile(`cookie["']?\s*:\s*["']?([^\s"'\x60\\;|&<>()]+(?:;[ \t]*[^\s"'\x60\\;|&<>()=]+=[^\s"'\x60\\;|&<>()]*)*)`)
	reBearer     = regexp.MustCompile(`bearer\s+([a-z0-9._~+/-]+=*)`)
	reBasic      = regexp.MustCompile(`basic\s+([a-z0-9+/]+={0,2})`)
	reAWSSecret  = regexp.MustCompile(`(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)["']?\s*[:=]\s*["']?([a-z0-9/+=]{16,})`)
	reUserinfo   = regexp.MustCompile(`[a-z][a-z0-9+.-]*://([^\s/?#;|<>()\x60]+)@`)
	// The same credentials without a scheme, as curl -x, the *_PROXY
	// variables, rsync and ftp take them: user:password@host[:port] as a
	// word of its own. The host must end the word (or go on with a path),
	// so an image's name:tag@sha256:digest is not one.
	reBareUserinfo = regexp.MustCompile(`(?:^|[\s"'=,(])([a-z0-9._~%+-]+:[^\s@/"'\x60;|&<>()]+)@[a-z0-9.-]+(?::[0-9]+)?(?:[\s/"'\x60;|&<>()]|$)`)
	reParam        = regexp.MustCompile(`[?&#;]([^=&#;?\s]+)=([^&#;\s"'<>\x60$()|]*)`)
)

// patternSpans finds the secrets that have a shape around them (a
// header, a URL, a PEM armour, a key name).
func patternSpans(spans []span, s string) []span {
	lower := asciiLower(s)
	if strings.Contains(s, "PRIVATE KEY") {
		for _, m := range rePEM.FindAllStringIndex(s, -1) {
			spans = append(spans, span{m[0], m[1], kindPrivateKey})
		}
	}
	if strings.Contains(s, "private_key") {
		spans = groupSpans(spans, reGCPPrivateKey, s, 1, kindGCPServiceKey)
	}
	if strings.Contains(lower, "authorization") {
		for _, m := range reAuthHeader.FindAllStringSubmatchIndex(lower, -1) {
			k := kindBearer
			if m[2] >= 0 && lower[m[2]:m[3]] == "basic" {
				k = kindBasicAuth
			}
			spans = append(spans, span{m[4], m[5], k})
		}
	}
	if containsAny(lower, "api-key", "auth-token", "private-token") {
		spans = groupSpans(spans, reCredHeader, lower, 1, kindBearer)
	}
	if strings.Contains(lower, "cookie") {
		spans = groupSpans(spans, reCookie, lower, 1, kindBearer)
	}
	if strings.Contains(lower, "bearer") {
		for _, m := range reBearer.FindAllStringSubmatchIndex(lower, -1) {
			if m[3]-m[2] >= 8 {
				spans = append(spans, span{m[2], m[3], kindBearer})
			}
		}
	}
	if strings.Contains(lower, "basic") {
		for _, m := range reBasic.FindAllStringSubmatchIndex(lower, -1) {
			if basicCredentials(s[m[2]:m[3]]) {
				spans = append(spans, span{m[2], m[3], kindBasicAuth})
			}
		}
	}
	if strings.Contains(lower, "secret") {
		spans = groupSpans(spans, reAWSSecret, lower, 1, kindAWSSecret)
	}
	if strings.Contains(s, "://") {
		spans = groupSpans(spans, reUserinfo, lower, 1, kindURLUserinfo)
	}
	if strings.IndexByte(s, '@') > 0 && strings.IndexByte(s, ':') >= 0 {
		spans = groupSpans(spans, reBareUserinfo, lower, 1, kindURLUserinfo)
	}
	if strings.IndexByte(s, '=') >= 0 {
		for _, m := range reParam.FindAllStringSubmatchIndex(lower, -1) {
			if secretParam(lower[m[2]:m[3]]) {
				spans = append(spans, span{m[4], m[5], kindURLSecret})
			}
		}
	}
	return assignSpans(spans, s, lower)
}

// groupSpans adds re's group g in text as spans of kind k.
func groupSpans(spans []span, re *regexp.Regexp, text string, g int, k secretKind) []span {
	for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
		spans = append(spans, span{m[2*g], m[2*g+1], k})
	}
	return spans
}

// basicCredentials reports whether t (after "Basic " outside a header)
// is base64 of user:password rather than an ordinary word.
func basicCredentials(t string) bool {
	b, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(t, "="))
	}
	if err != nil || !utf8.Valid(b) {
		return false
	}
	return strings.IndexByte(string(b), ':') > 0
}

// secretParam reports whether a (lowered) query or fragment parameter
// name suggests its value is a credential. It errs towards hiding: a
// hidden "author" or "zipcode" costs little.
func secretParam(name string) bool {
	switch name {
	case "key", "sig", "code", "auth", "pass", "pwd", "jwt", "otp", "session", "sessionid", "jsessionid", "phpsessid":
		return true
	}
	return containsAny(name, "token", "secret", "password", "passwd", "apikey", "api_key", "api-key",
		"signature", "credential", "auth") ||
		strings.HasSuffix(name, "key") || strings.HasSuffix(name, "sig")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// asciiLower lowers ASCII letters only, so offsets into the result are
// offsets into s (strings.ToLower may change a string's length).
func asciiLower(s string) string {
	i := 0
	for i < len(s) && (s[i] < 'A' || s[i] > 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

// Byte classes for the token shapes.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
func isUpperDigit(c byte) bool { return 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
func isB64URL(c byte) bool     { return isAlnum(c) || c == '-' || c == '_' }
func isAlnumDash(c byte) bool  { return isAlnum(c) || c == '-' }
func isAlnumUnder(c byte) bool { return isAlnum(c) || c == '_' }
func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
func isTokenByte(c byte) bool { return isB64URL(c) || c == '+' || c == '/' || c == '=' }
func isDigit(c byte) bool     { return '0' <= c && c <= '9' }
func isLower(c byte) bool     { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool     { return 'A' <= c && c <= 'Z' }
func hasByte(s string, f func(byte) bool) bool {
	for i := range len(s) {
		if f(s[i]) {
			return true
		}
	}
	return false
}

// prefixRule is a token that announces itself: a fixed prefix, then at
// least minTail bytes of tail.
type prefixRule struct {
	prefix   string
	k        secretKind
	tail     func(byte) bool
	minTail  int
	boundary bool // the byte before must not be alphanumeric
	digit    bool // the tail must contain a digit
}

// prefixRules lists the provider tokens. It is a function, not a
// variable, so that nothing at package level can be changed.
func prefixRules() []prefixRule {
	return []prefixRule{
		// OpenAI (sk-, sk-proj-), Anthropic (sk-ant-): a digit keeps
		// hyphenated names such as sk-learn-... out.
		{prefix: "sk-", k: kindOpenAI, tail: isB64URL, minTail: 20, boundary: true, digit: true},
		{prefix: "ghp_", k: kindGitHub, tail: isAlnum, minTail: 20},
		{prefix: "gho_", k: kindGitHub, tail: isAlnum, minTail: 20},
		{prefix: "ghs_", k: kindGitHub, tail: isAlnum, minTail: 20},
		{prefix: "ghu_", k: kindGitHub, tail: isAlnum, minTail: 20},
		{prefix: "ghr_", k: kindGitHub, tail: isAlnum, minTail: 20},
		{prefix: "github_pat_", k: kindGitHub, tail: isAlnumUnder, minTail: 20},
		{prefix: "AKIA", k: kindAWSKeyID, tail: isUpperDigit, minTail: 16},
		{prefix: "ASIA", k: kindAWSKeyID, tail: isUpperDigit, minTail: 16},
		{prefix: "AIza", k: kindGCP, tail: isB64URL, minTail: 35},
		{prefix: "xoxb-", k: kindSlack, tail: isAlnumDash, minTail: 10},
		{prefix: "xoxp-", k: kindSlack, tail: isAlnumDash, minTail: 10},
		{prefix: "xoxa-", k: kindSlack, tail: isAlnumDash, minTail: 10},
		{prefix: "xoxe-", k: kindSlack, tail: isAlnumDash, minTail: 10},
		{prefix: "xoxr-", k: kindSlack, tail: isAlnumDash, minTail: 10},
		{prefix: "xoxs-", k: kindSlack, tail: isAlnumDash, minTail: 10},
		{prefix: "xapp-", k: kindSlack, tail: isAlnumDash, minTail: 10},
	}
}

// tokenSpans finds the secrets that are recognisable by themselves:
// provider tokens, JWTs and long high-entropy runs.
func tokenSpans(spans []span, s string) []span {
	for _, rule := range prefixRules() {
		spans = prefixSpans(spans, s, rule)
	}
	spans = jwtSpans(spans, s)
	return entropySpans(spans, s)
}

func prefixSpans(spans []span, s string, rule prefixRule) []span {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], rule.prefix)
		if j < 0 {
			break
		}
		start := i + j
		end := start + len(rule.prefix)
		for end < len(s) && rule.tail(s[end]) {
			end++
		}
		tail := s[start+len(rule.prefix) : end]
		ok := len(tail) >= rule.minTail &&
			(!rule.boundary || start == 0 || !isAlnum(s[start-1])) &&
			(!rule.digit || hasByte(tail, isDigit))
		if ok {
			spans = append(spans, span{start, end, rule.k})
			i = end
		} else {
			i = start + 1
		}
	}
	return spans
}

// jwtSpans finds JWTs (and JWEs): base64url segments joined by dots, the
// first a JSON header ("eyJ" is base64 of `{"`).
func jwtSpans(spans []span, s string) []span {
	seg := func(i int) int {
		for i < len(s) && isB64URL(s[i]) {
			i++
		}
		return i
	}
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "eyJ")
		if j < 0 {
			break
		}
		start := i + j
		end, parts := seg(start), 1
		if end-start < 10 {
			i = start + 1
			continue
		}
		for parts < 5 && end+1 < len(s) && s[end] == '.' {
			next := seg(end + 1)
			if parts == 1 && next-(end+1) < 4 {
				break
			}
			end, parts = next, parts+1
		}
		if parts >= 3 {
			spans = append(spans, span{start, end, kindJWT})
			i = end
		} else {
			i = start + 1
		}
	}
	return spans
}

// Thresholds for a bare token to count as a secret.
const (
	minEntropyLen = 32  // shortest mixed-case run that is judged
	minEntropy    = 4.0 // bits per character
	minHexLen     = 41  // one more than a git SHA-1
)

// entropySpans finds long runs of token characters that look random:
// mixed case with a digit and at least 4 bits of entropy per character,
// or more than 40 hex digits. A run with many slashes is a path and is
// judged element by element.
func entropySpans(spans []span, s string) []span {
	for i := 0; i < len(s); {
		if !isTokenByte(s[i]) || s[i] == '=' {
			i++
			continue
		}
		end := i
		for end < len(s) && isTokenByte(s[end]) && s[end] != '=' {
			end++
		}
		// '=' only ends a run, as base64 padding does; "NAME=value" is
		// two runs.
		for end < len(s) && s[end] == '=' {
			end++
		}
		spans = hexSpans(spans, s, i, end)
		run := s[i:end]
		if len(run) >= minEntropyLen {
			if strings.Count(run, "/")*16 <= len(run) {
				spans = randomSpan(spans, s, i, end)
			} else {
				for off := i; off < end; {
					k := strings.IndexByte(s[off:end], '/')
					if k < 0 {
						k = end - off
					}
					spans = randomSpan(spans, s, off, off+k)
					off += k + 1
				}
			}
		}
		i = end
	}
	return spans
}

// randomSpan adds s[a:b] if it looks random: mixed case with a digit,
// high entropy, and not made of words (CamelCase identifiers such as
// MyServiceFactoryImpl2Test have as much entropy as a key).
func randomSpan(spans []span, s string, a, b int) []span {
	t := s[a:b]
	if len(t) < minEntropyLen || !hasByte(t, isDigit) || !hasByte(t, isLower) || !hasByte(t, isUpper) ||
		entropy(t) < minEntropy || wordlike(t) {
		return spans
	}
	return append(spans, span{a, b, kindHighEntropy})
}

// wordlike reports text that reads as words: vowels (counting y) make
// up at least 30% of its letters (random base64: 23%) and it has a run of
// five or more lowercase letters (rare in random base64), with hardly
// two capitals in a row. Random tokens pass all three about once in a
// hundred.
func wordlike(t string) bool {
	letters, vowels, longest := letterStats(t, "aeiouy")
	return letters > 0 && 10*vowels >= 3*letters && longest >= 5 && upperPairs(t) < 2
}

// upperPairs counts adjacent uppercase pairs: random mixed case has one
// in six pairs, CamelCase almost none.
func upperPairs(t string) int {
	n := 0
	for i := 1; i < len(t); i++ {
		if isUpper(t[i]) && isUpper(t[i-1]) {
			n++
		}
	}
	return n
}

// letterStats counts t's letters and those among them in vowels (any
// case), and finds its longest run of lowercase letters.
func letterStats(t, vowelSet string) (letters, vowels, longestLower int) {
	run := 0
	for i := range len(t) {
		c := t[i]
		if isLower(c) {
			run++
			longestLower = max(longestLower, run)
		} else {
			run = 0
		}
		if isLower(c) || isUpper(c) {
			letters++
			if strings.IndexByte(vowelSet, c|0x20) >= 0 {
				vowels++
			}
		}
	}
	return letters, vowels, longestLower
}

// hexSpans adds the runs of more than 40 hex digits in s[a:b].
func hexSpans(spans []span, s string, a, b int) []span {
	for i := a; i < b; {
		if !isHexDigit(s[i]) {
			i++
			continue
		}
		j := i
		for j < b && isHexDigit(s[j]) {
			j++
		}
		if j-i >= minHexLen {
			spans = append(spans, span{i, j, kindHighEntropy})
		}
		i = j
	}
	return spans
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := range len(s) {
		counts[s[i]]++
	}
	h, n := 0.0, float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// Thresholds for EncodedData.
const (
	minEncodedLen  = 24 // a path element or label this long is judged
	minChunkLen    = 16 // a label this long counts towards chunked data
	minChunkLabels = 3  // this many such labels make a hostname suspect
)

// EncodedData reports whether a hostname or path carries what looks like
// encoded data (the way a command smuggles a secret out in a DNS lookup
// or a request path), and if so a short reason. It flags an element
// (a DNS label or path element) of at least 24 characters that looks
// like base32, base64url or, in a hostname, hex, with high entropy and
// letters and digits interleaved as random data has them; and a
// hostname with three or more random-looking labels of at least 16.
//
// Deliberately not flagged: words and identifiers however long
// (kubernetes-dashboard-metrics-scraper, node_modules), version strings
// and Go pseudo-versions, UUIDs (8-4-4-4-12 hex, ubiquitous as resource
// names), and hex elements of a path: content-addressed stores (git
// objects, the Go build cache, npm's cacache, docker layers) name files
// by digest, and flagging them would make every build look like
// exfiltration. A hex label in a hostname is flagged.
func EncodedData(hostOrPath string) (bool, string) {
	isPath := strings.ContainsRune(hostOrPath, '/')
	elems := strings.FieldsFunc(hostOrPath, func(r rune) bool {
		return r >= utf8.RuneSelf || !isB64URL(byte(r)) && r != '+' && r != '='
	})
	chunks := 0
	for _, e := range elems {
		e = strings.TrimRight(e, "=")
		if ok, why := encodedElement(e, isPath); ok {
			return true, why
		}
		if chunkLabel(e) {
			chunks++
		}
	}
	if !isPath && chunks >= minChunkLabels {
		return true, "several labels look like chunks of encoded data"
	}
	return false, ""
}

// encodedElement judges one element of at least minEncodedLen.
func encodedElement(e string, isPath bool) (bool, string) {
	if len(e) < minEncodedLen || uuidLike(e) {
		return false, ""
	}
	hexDigits := 0
	for i := range len(e) {
		if isHexDigit(e[i]) {
			hexDigits++
		}
	}
	if 10*hexDigits >= 9*len(e) {
		// Hex, or nearly (a digest with a suffix, as in the Go build
		// cache): data in a hostname, a content address in a path.
		if isPath || entropy(e) < 3.0 {
			return false, ""
		}
		return true, "a label looks like hex-encoded data"
	}
	// Case carries nothing in a hostname: judge it as the resolver sees
	// it, lowered.
	t := e
	if !isPath {
		t = asciiLower(e)
	}
	if entropy(t) < 3.5 || !randomLooking(t) {
		return false, ""
	}
	if isPath {
		return true, "a path element looks like encoded data"
	}
	return true, "a label looks like encoded data"
}

// chunkLabel reports a label that could be one chunk of data split over
// several labels: long, no hyphen (words are joined by them), letters and
// digits interleaved, and not too repetitive. Alone it means little;
// three in one hostname do not occur in ordinary names.
func chunkLabel(e string) bool {
	return len(e) >= minChunkLen && strings.IndexByte(e, '-') < 0 && classSwitches(e) >= 2 && entropy(asciiLower(e)) >= 3.0
}

// randomLooking reports whether t reads as random base32/base64 rather
// than words or a version: mostly letters, classes (digit, lower, upper)
// alternating at least three times, and not wordlike (35% or more vowels
// among the letters, random letters having 19%, and a run of five
// lowercase letters), and not CamelCase (mixed case with hardly two
// capitals in a row). Random elements of 24 characters pass about nine
// times in ten; that is enough for a signal that exfiltration repeats.
func randomLooking(t string) bool {
	letters, vowels, longest := letterStats(t, "aeiou")
	words := 100*vowels >= 35*letters && longest >= 5
	camel := hasByte(t, isUpper) && hasByte(t, isLower) && upperPairs(t) < 2
	return !camel && 2*letters >= len(t) && classSwitches(t) >= 3 && !words
}

// classSwitches counts adjacent alphanumeric pairs of different classes.
func classSwitches(t string) int {
	n := 0
	for i := 1; i < len(t); i++ {
		if isAlnum(t[i]) && isAlnum(t[i-1]) && byteClass(t[i]) != byteClass(t[i-1]) {
			n++
		}
	}
	return n
}

// byteClass is 0 for a digit, 1 lowercase, 2 uppercase, 3 anything else.
func byteClass(c byte) int {
	switch {
	case isDigit(c):
		return 0
	case isLower(c):
		return 1
	case isUpper(c):
		return 2
	}
	return 3
}

// uuidLike reports an 8-4-4-4-12 hex UUID.
func uuidLike(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHexDigit(s[i]) {
				return false
			}
		}
	}
	return true
}
