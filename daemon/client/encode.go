package client

import (
	"strconv"
	"unicode/utf8"
)

// appendExecRequest appends req as json.Marshal writes it, byte for
// byte (a test holds them equal, every field set): the request is on
// the path of every run, and encoding/json's first Marshal of a type in
// a fresh process builds its encoder by reflection (0.1 to 0.9 ms
// measured, against a few microseconds once built).
func appendExecRequest(b []byte, req ExecRequest) []byte {
	b = append(b, `{"argv":`...)
	b = appendStrings(b, req.Argv)
	if req.Command != "" {
		b = appendString(append(b, `,"command":`...), req.Command)
	}
	b = appendStrings(append(b, `,"env":`...), req.Env)
	b = appendString(append(b, `,"cwd":`...), req.Cwd)
	b = strconv.AppendUint(append(b, `,"umask":`...), uint64(req.Umask), 10)
	for _, f := range []struct{ name, value string }{
		{"workspace", req.Workspace}, {"policy", req.Policy}, {"session", req.Session},
		{"agent", req.Agent}, {"intent", req.Intent}, {"reviewer", req.Reviewer},
	} {
		if f.value != "" {
			b = appendString(append(append(append(b, `,"`...), f.name...), `":`...), f.value)
		}
	}
	if req.TimeoutMS != 0 {
		b = strconv.AppendInt(append(b, `,"timeout_ms":`...), req.TimeoutMS, 10)
	}
	b = strconv.AppendInt(append(b, `,"retries":`...), int64(req.Retries), 10)
	b = appendTrue(b, "no_transaction", req.NoTransaction)
	b = appendTrue(b, "no_detect", req.NoDetect)
	b = appendTrue(b, "require_isolation", req.RequireIsolation)
	b = appendTrue(b, "stdin", req.Stdin)
	if req.Retry != "" {
		b = appendString(append(b, `,"retry":`...), req.Retry)
	}
	if len(req.Grants) > 0 {
		b = appendStrings(append(b, `,"grants":`...), req.Grants)
	}
	b = appendTrue(b, "questions", req.Questions)
	b = appendTrue(b, "text", req.Text)
	return append(b, '}')
}

// appendTrue appends an omitempty bool member that is set.
func appendTrue(b []byte, name string, v bool) []byte {
	if !v {
		return b
	}
	return append(append(append(b, `,"`...), name...), `":true`...)
}

// appendStrings appends ss as a JSON array (nil: null).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string as encoding/json writes it:
// ", \ and control characters escaped (\b \f \n \r \t, else \u00XX),
// <, > and & as \u00XX, U+2028 and U+2029 escaped, and each byte that
// is not UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
