package grants

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/netdest"
)

// Request is one boundary request. Only the fields marked "hashed" bind a
// grant; the others describe the request for reviewers and logs.
type Request struct {
	Session   string             // hashed: the agent session
	Cwd       string             // hashed: the command's working directory
	Command   string             // hashed: the exact command string
	Surface   boundary.Surface   // hashed
	Operation boundary.Operation // hashed: read_file, write_file, make_reg, connect, run, ...
	// Path is the path as the command named it; ResolvedPath the same
	// with every symlink resolved. Both are hashed.
	Path         string
	ResolvedPath string
	// Dev and Ino identify the object ResolvedPath named when the request
	// was made (zero for an object that does not exist yet). Hashed, so a
	// path swapped for another object between review and retry no longer
	// matches.
	Dev, Ino uint64
	// Born is the object's birth time (ns), so an inode number the file
	// system reused for a new object does not match either. Hashed.
	Born int64
	// Destination is a network request's destination, typed as the
	// proxy decided it (netdest's normal form). Hashed as its host:port
	// text.
	Destination netdest.Dest
	// MalformedDestination is a network destination that came as text
	// (an observed denial, a report, a corpus: see WithDestinationText)
	// and is not exactly a normalised host:port; Destination is then
	// zero, and the broker refuses the request. Hashed in Destination's
	// place.
	MalformedDestination string
	// Addresses are the addresses Destination resolved to (or its
	// literal), sorted and distinct: what the proxy dials, bound like a
	// file's resolved path. Hashed as their text, comma-separated, in
	// their order (the broker refuses any other order).
	Addresses []netip.Addr
	Agent     string // hashed: which agent asked
	Intent    string // hashed: the user's request, evidence for review
	// ToolCallID and Attempt differ between an attempt and its retry and
	// are not hashed.
	ToolCallID string
	Attempt    int
	// Held marks a network request decided while its connection waits
	// at the proxy (not one observed after the attempt). Not hashed.
	Held bool
	// Programs are the executables that made the refused calls, when
	// the sandbox knows each (see sandbox/detect's Denial). Not hashed:
	// it says who asked, not what a grant covers.
	Programs []string
}

// fields returns the hashed fields as key/value pairs in key order,
// empty ones left out. Keys are fixed strings listed in sorted order;
// adding a field means adding it here, in its place.
func (r Request) fields() [][2]string {
	var dev, ino, born string
	if r.Dev != 0 || r.Ino != 0 {
		dev, ino = strconv.FormatUint(r.Dev, 10), strconv.FormatUint(r.Ino, 10)
	}
	if r.Born != 0 {
		born = strconv.FormatInt(r.Born, 10)
	}
	all := [...][2]string{
		{"addresses", joinAddrs(r.Addresses)},
		{"agent", r.Agent},
		{"born", born},
		{"command", r.Command},
		{"cwd", r.Cwd},
		{"destination", r.DestinationText()},
		{"dev", dev},
		{"ino", ino},
		{"intent", r.Intent},
		{"operation", string(r.Operation)},
		{"path", r.Path},
		{"resolved_path", r.ResolvedPath},
		{"session", r.Session},
		{"surface", string(r.Surface)},
	}
	out := make([][2]string, 0, len(all))
	for _, f := range all {
		if f[1] != "" {
			out = append(out, f)
		}
	}
	return out
}

// DestinationText is the destination as text: MalformedDestination, or
// Destination's host:port; "" when there is none: what the hash encodes
// and a reviewer reads.
func (r Request) DestinationText() string {
	if r.MalformedDestination != "" || r.Destination == (netdest.Dest{}) {
		return r.MalformedDestination
	}
	return r.Destination.String()
}

// WithDestinationText returns r with the network destination s, text
// from where a destination enters the process other than the proxy (an
// observed denial, a report, an evaluation corpus): Destination when s
// is exactly a normalised host:port, MalformedDestination otherwise, so
// the request still says what was asked and the broker refuses it. ""
// is no destination.
func (r Request) WithDestinationText(s string) Request {
	r.Destination, r.MalformedDestination = netdest.Dest{}, ""
	if s == "" {
		return r
	}
	if d, err := netdest.ParseHostPort(s); err == nil && d.String() == s {
		r.Destination = d
	} else {
		r.MalformedDestination = s
	}
	return r
}

// joinAddrs is addresses as they are hashed: their text, comma-joined.
func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// Fields returns the hashed fields as key/value pairs in key order,
// empty ones left out: what the hash covers, for a reviewer to read.
func (r Request) Fields() [][2]string { return r.fields() }

// Canonical returns the canonical encoding of the hashed fields: for each
// non-empty field in key order, the key's length, the key, the value's
// length and the value, lengths as uvarints. No delimiter can be forged
// by a value: command "a|b" with cwd "c" and command "a" with cwd "b|c"
// encode differently.
func (r Request) Canonical() []byte {
	fs := r.fields()
	n := 0
	for _, f := range fs {
		n += 2*binary.MaxVarintLen64 + len(f[0]) + len(f[1])
	}
	b := make([]byte, 0, n)
	for _, f := range fs {
		b = binary.AppendUvarint(b, uint64(len(f[0])))
		b = append(b, f[0]...)
		b = binary.AppendUvarint(b, uint64(len(f[1])))
		b = append(b, f[1]...)
	}
	return b
}

// Hash is the request hash: SHA-256 of the canonical encoding.
func (r Request) Hash() [32]byte { return sha256.Sum256(r.Canonical()) }

// HashHex is Hash in hex, for reports and logs.
func (r Request) HashHex() string {
	h := r.Hash()
	return hex.EncodeToString(h[:])
}

// errCanonical reports a malformed canonical encoding.
var errCanonical = errors.New("grants: malformed canonical encoding")

// decodeCanonical splits a canonical encoding back into its pairs. It
// exists so tests can prove the encoding is injective.
func decodeCanonical(b []byte) ([][2]string, error) {
	var out [][2]string
	for len(b) > 0 {
		var pair [2]string
		for i := range pair {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return nil, errCanonical
			}
			pair[i] = string(b[k : k+int(n)])
			b = b[k+int(n):]
		}
		out = append(out, pair)
	}
	return out, nil
}
