package broker

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/ruletext"
)

// Rule matches boundary requests: a surface, an operation (exact, a
// class, or "*") and a target pattern (a path glob for the filesystem, a
// destination pattern for the network: see netdest.ParsePattern).
type Rule struct {
	Surface   boundary.Surface
	Operation string // an operation, a class or "*"
	Target    string
	// dest is Target parsed, for the network.
	dest netdest.Pattern
}

// operationClasses group the operations rules can name together.

// ParseRule reads "fs OPERATION PATTERN" or "net OPERATION PATTERN", e.g.
// "fs read ~/datasets/**", "fs write_file /etc/hosts", "net connect
// *.pypi.org:443". Fields are split at white space a backslash does not
// escape, and in a filesystem pattern a backslash takes the next
// character literally ("fs read /data/my\ file\*" names the one file
// "my file*": see ruletext). home expands a leading "~", escaped, so a
// home whose name holds a wildcard is still that one directory.
func ParseRule(s, home string) (Rule, error) {
	f, err := ruletext.Fields(s)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	if len(f) != 3 {
		return Rule{}, fmt.Errorf("rule %q: want SURFACE OPERATION PATTERN", s)
	}
	var r Rule
	switch f[0] {
	case "fs":
		r.Surface = boundary.Filesystem
	case "net":
		r.Surface = boundary.Network
	default:
		return Rule{}, fmt.Errorf("rule %q: surface must be fs or net", s)
	}
	r.Operation, r.Target = f[1], f[2]
	if op := boundary.Operation(r.Operation); r.Operation != "*" && !op.Of(r.Surface) &&
		!(r.Surface == boundary.Filesystem && (r.Operation == "read" || r.Operation == "write")) {
		return Rule{}, fmt.Errorf("rule %q: %s is not an operation of the %s surface", s, r.Operation, r.Surface)
	}
	if r.Surface == boundary.Network {
		p, err := netdest.ParsePattern(r.Target)
		if err != nil {
			return Rule{}, fmt.Errorf("rule %q: %w", s, err)
		}
		r.dest, r.Target = p, p.String()
		return r, nil
	}
	if r.Target, err = ruletext.ExpandHome(r.Target, home); err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	if err := ruletext.Check(r.Target); err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	return r, nil
}

// ExactRule is the rule text that names exactly one boundary: its
// surface, its operation (not a class) and its one path (escaped, under
// "~/" when it is below home) or destination (host:port, normalised). It
// is the inverse of ParseRule: the rule parses back, with the same home,
// to one that matches that boundary and no other.
func ExactRule(surface boundary.Surface, op boundary.Operation, target, home string) (string, error) {
	if !op.Of(surface) {
		return "", fmt.Errorf("%s is not an operation of the %s surface", op, surface)
	}
	switch surface {
	case boundary.Network:
		d, err := netdest.ParseHostPort(target)
		if err != nil || d.String() != target {
			return "", fmt.Errorf("destination %q is not a normalised host:port", target)
		}
		return "net " + string(op) + " " + d.String(), nil
	case boundary.Filesystem:
		if !strings.HasPrefix(target, "/") || path.Clean(target) != target || strings.IndexByte(target, 0) >= 0 {
			return "", fmt.Errorf("path %q is not absolute and clean", target)
		}
		if rel, ok := pathtree.Below(home, target); ok && home != "/" && strings.HasPrefix(home, "/") && path.Clean(home) == home {
			return "fs " + string(op) + " ~/" + ruletext.Escape(rel), nil
		}
		return "fs " + string(op) + " " + ruletext.Escape(target), nil
	}
	return "", fmt.Errorf("no rule names a %s boundary", surface)
}

// Matches reports whether the rule covers req.
func (r Rule) Matches(req grants.Request) bool {
	if r.Surface != req.Surface || !r.matchOperation(req.Operation) {
		return false
	}
	if r.Surface == boundary.Network {
		d, ok := destOf(req)
		return ok && r.dest.Match(d)
	}
	// A rule must cover both the path as named and as resolved, so a
	// symlink cannot carry an allowed name to a denied object, nor a
	// denied object hide behind an allowed name.
	p := req.ResolvedPath
	if p == "" {
		p = req.Path
	}
	return matchPath(r.Target, p) && (req.Path == "" || matchPath(r.Target, req.Path))
}

// MatchesEither reports whether the rule covers the path as named or as
// resolved, or the destination or any address it resolved to: deny and
// ask rules use it, so either name is enough to stop.
func (r Rule) MatchesEither(req grants.Request) bool {
	if r.Surface != req.Surface || !r.matchOperation(req.Operation) {
		return false
	}
	if r.Surface == boundary.Network {
		d, ok := destOf(req)
		if !ok {
			return false
		}
		if r.dest.Match(d) {
			return true
		}
		for _, a := range addrsOf(req) {
			if r.dest.NamesAddr(a, d.Port) {
				return true
			}
		}
		return false
	}
	return matchPath(r.Target, req.Path) || matchPath(r.Target, req.ResolvedPath)
}

func (r Rule) matchOperation(op boundary.Operation) bool {
	switch r.Operation {
	case "*", string(op):
		return true
	case "read":
		return op.Of(boundary.Filesystem) && op.Reads()
	case "write":
		return op.Of(boundary.Filesystem) && !op.Reads() && op != boundary.OpIoctlDev
	}
	return false
}

// matchPath matches an absolute path against a rule's pattern (see
// ruletext.Match).
func matchPath(pattern, name string) bool { return ruletext.Match(pattern, name) }

// literal is the one path a filesystem rule names, if it names one (no
// wildcard: see ruletext.Literal).
func (r Rule) literal() (string, bool) {
	if r.Surface != boundary.Filesystem {
		return "", false
	}
	return ruletext.Literal(r.Target)
}

// destOf is a network request's destination; one that came as text and
// was malformed names nothing (malformed denies it before any rule is
// consulted).
func destOf(req grants.Request) (netdest.Dest, bool) {
	return req.Destination, req.MalformedDestination == "" && req.Destination != (netdest.Dest{})
}

// addrsOf are the addresses a network request would dial: those it
// resolved to, and its literal.
func addrsOf(req grants.Request) []netip.Addr {
	var out []netip.Addr
	if d, ok := destOf(req); ok && d.IsIP() {
		out = append(out, d.Addr)
	}
	for _, a := range req.Addresses {
		if a.IsValid() {
			out = append(out, a.Unmap())
		}
	}
	return out
}
