package netproxy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/netdest"
)

// errTarget wraps every request-target refusal (a 400).
var errTarget = errors.New("netproxy: bad request target")

func targetErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errTarget}, args...)...)
}

// parseTarget is the one reader of what a client asked for. It works
// on the raw request target (r.RequestURI) and the raw Host header
// value ("" when absent):
//   - CONNECT: authority form "host:port" only (port required, no
//     userinfo, path, query or fragment);
//   - any other method: absolute form "http://host[:port]/..." only
//     (port 80 when absent); origin form, other schemes (https must use
//     CONNECT), userinfo and fragments are refused;
//   - a Host header, when present, must name the same normalised
//     destination (port 80 when absent for http; the authority's port
//     for CONNECT).
//
// Hosts and ports are normalised by netdest.
func parseTarget(method, requestURI, host string) (netdest.Dest, error) {
	if requestURI == "" {
		return netdest.Dest{}, targetErr("empty request target")
	}
	if hasJunk(requestURI) {
		return netdest.Dest{}, targetErr("control characters or spaces in the request target")
	}
	if method == http.MethodConnect {
		return parseConnect(requestURI, host)
	}
	rest, ok := cutPrefixFold(requestURI, "http://")
	if !ok {
		switch {
		case strings.HasPrefix(requestURI, "/") || requestURI == "*":
			return netdest.Dest{}, targetErr("origin-form target: send the absolute http:// URI to the proxy")
		case strings.Contains(requestURI, "://"):
			return netdest.Dest{}, targetErr("only http:// URIs are proxied; use CONNECT for https and anything else")
		}
		return netdest.Dest{}, targetErr("not an absolute http:// URI")
	}
	if strings.IndexByte(requestURI, '#') >= 0 {
		return netdest.Dest{}, targetErr("fragment in the request target")
	}
	auth := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		auth = rest[:i]
	}
	d, err := parseAuthority(auth, 80)
	if err != nil {
		return netdest.Dest{}, err
	}
	return d, sameHost(host, d, 80)
}

func parseConnect(authority, host string) (netdest.Dest, error) {
	if strings.ContainsAny(authority, "/?#@\\%") {
		return netdest.Dest{}, targetErr("CONNECT needs host:port and nothing else")
	}
	d, err := netdest.ParseHostPort(authority)
	if err != nil {
		return netdest.Dest{}, fmt.Errorf("%w: %w", errTarget, err)
	}
	return d, sameHost(host, d, d.Port)
}

// sameHost checks a Host header against the target's destination.
func sameHost(host string, d netdest.Dest, defPort uint16) error {
	if host == "" {
		return nil
	}
	if hasJunk(host) {
		return targetErr("control characters or spaces in the Host header")
	}
	hd, err := parseAuthority(host, defPort)
	if err != nil {
		return targetErr("bad Host header")
	}
	if hd.Host != d.Host || hd.Port != d.Port {
		return targetErr("the Host header names %s but the request targets %s", hd, d)
	}
	return nil
}

// parseAuthority parses "host", "host:port", "[v6]" or "[v6]:port";
// defPort is the port when none is given. Userinfo, percent-encoding
// and an empty port are refused.
func parseAuthority(a string, defPort uint16) (netdest.Dest, error) {
	if a == "" {
		return netdest.Dest{}, targetErr("empty host")
	}
	if strings.ContainsAny(a, "@/?#\\%") {
		return netdest.Dest{}, targetErr("userinfo or junk in the authority")
	}
	hostPart, port, hasPort := a, "", false
	if a[0] == '[' {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return netdest.Dest{}, targetErr("missing ']'")
		}
		hostPart = a[:end+1]
		if rest := a[end+1:]; rest != "" {
			if rest[0] != ':' {
				return netdest.Dest{}, targetErr("junk after ']'")
			}
			port, hasPort = rest[1:], true
		}
	} else if i := strings.LastIndexByte(a, ':'); i >= 0 {
		if strings.IndexByte(a[:i], ':') >= 0 {
			return netdest.Dest{}, targetErr("too many ':' (an IPv6 address must be bracketed)")
		}
		hostPart, port, hasPort = a[:i], a[i+1:], true
	}
	p := defPort
	if hasPort {
		var err error
		if p, err = netdest.ParsePort(port); err != nil {
			return netdest.Dest{}, fmt.Errorf("%w: %w", errTarget, err)
		}
	}
	d, err := netdest.ParseHost(hostPart, p)
	if err != nil {
		return netdest.Dest{}, fmt.Errorf("%w: %w", errTarget, err)
	}
	return d, nil
}

// hasJunk reports bytes no request target or Host may hold: controls,
// spaces, DEL and non-ASCII (IDNA names arrive in punycode on the wire).
func hasJunk(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return true
		}
	}
	return false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
