package detect

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/pathtree"
)

// This file is the one home of what counts as a denial: which observed
// intents the sandbox refused (judged from sandboxd's own copy of the
// policy, reads by the run's own landlock.Carveout), which kernel records
// name a boundary and what is noise. Two denials are the same one when
// their boundary.Key is. It does no I/O.

// Policy is what the sandbox allowed one run, as far as judging observed
// intents needs it. Paths are absolute, as the command sees them.
type Policy struct {
	// Writable are the roots the command may write below (the workspace,
	// further writable roots, caches, the private /tmp and device nodes).
	Writable []string
	// ReadOnly are persistence paths bound read-only inside Writable.
	ReadOnly []string
	// Pinned are directories bound onto themselves: they cannot be
	// renamed or removed.
	Pinned []string
	// Granted are the run's exceptions.
	Granted []Grant
	// ReadsObserved is set when reads were observed (no audit detector
	// reports them); they are then judged by Reads, the carve-out the
	// run's ruleset enforces.
	ReadsObserved bool
	Reads         landlock.Carveout
	// Readable are further roots the command may read (the helper's
	// private /proc and /dev); /proc's links into other views of the
	// tree are judged by what they name.
	Readable []string
	// NetNS: the run had a network namespace, whose loopback servers are
	// the sandbox's own.
	NetNS bool
	// Captured: in that namespace every TCP connect off loopback was
	// captured and decided by the egress proxy, which reports its own
	// boundary: the connect itself is none.
	Captured bool
}

// Grant is one granted exception: Operation on the object at Path.
type Grant struct {
	Operation boundary.Operation
	Path      string
}

// covers reports whether the grant allows op on its object.
func (g Grant) covers(op boundary.Operation) bool {
	switch g.Operation {
	case "make_reg":
		return op == "make_reg" || op == "write_file" || op == "truncate"
	case "execute":
		return op == "execute" || op == "read_file"
	}
	return op == g.Operation
}

// Refused judges which intents the sandbox refused, from its own policy:
// anything outside the writable roots, and inside them the persistence
// paths bound read-only and the directories pinned in place. A connect
// in the network namespace reaches only the sandbox's own loopback; any
// other destination is refused.
func (p Policy) Refused(in []Intent) []Denial {
	var out []Denial
	for _, i := range in {
		if d, ok := p.refused(i); ok {
			out = append(out, d)
		}
	}
	return out
}

// How each observed call is judged. The observer sees a call before the
// kernel runs it, not its result, so a boundary is only what the
// sandbox's own rules would refuse and the kernel would have got to:
//   - resolve_unix: the supervisor's own refusal of a connect to a
//     pathname unix socket the run did not make (connect_linux.go);
//   - connect: with capture, off loopback: never (the proxy decides the
//     captured connection and reports it);
//   - connect: refused, except in netns mode to the loopback when a
//     server of the run listens there, or nobody listens on that port on
//     either side (an ordinary ECONNREFUSED, as it would be bare); a
//     loopback port a host server listens on is one the sandbox cut the
//     command off from, a boundary;
//   - a name that is no path (a pipe, a socket, an anonymous inode
//     reopened through /proc/self/fd or /dev/stdout): never, Landlock does
//     not restrict those objects;
//   - creating a name (make_*, link) that already exists: never, the
//     kernel answers EEXIST before any LSM is asked;
//   - writing, truncating, removing or changing the metadata of a name
//     that does not exist: never, the kernel answers ENOENT (or EACCES,
//     when file permissions stop the lookup) first;
//   - reads (only observed without audit): refused when Landlock's union
//     of rules would refuse them: not granted by the carve-out
//     (landlock.Carveout, the run's own), a writable root (the
//     workspace, the private caches, /tmp), /proc or /dev, or a granted
//     object;
//   - every other write: refused outside the writable roots, and inside
//     them on the read-only persistence paths and pinned directories.
func (p Policy) refused(i Intent) (Denial, bool) {
	if i.Op == boundary.OpConnect {
		host, _, _ := net.SplitHostPort(i.Destination)
		ip := net.ParseIP(host)
		if p.NetNS && ip != nil && ip.IsLoopback() && (i.Inside || !i.Host) {
			// The namespace's own loopback: a server of the run, or
			// nothing on either side (an ordinary ECONNREFUSED).
			return Denial{}, false
		}
		if p.NetNS && p.Captured && ip != nil && !ip.IsLoopback() {
			return Denial{}, false // the proxy's to decide and report
		}
		dest := i.Destination
		if d, err := netdest.ParseHostPort(dest); err == nil {
			dest = d.String() // one spelling: [::1]:80 is 127.0.0.1:80, as the proxy names it
		}
		return Denial{Surface: boundary.Network, Operation: boundary.OpConnect, Destination: dest}, true
	}
	if i.Op == boundary.OpResolveUnix {
		// The supervisor refused it itself: a socket the run did not make.
		return Denial{Surface: boundary.Filesystem, Operation: boundary.OpResolveUnix, Path: i.Path}, true
	}
	if !filepath.IsAbs(i.Path) {
		return Denial{}, false
	}
	var denied bool
	switch {
	case i.Op.Reads():
		if !p.ReadsObserved || i.Ino == 0 {
			return Denial{}, false // audit reports denied reads; a missing file is no boundary (as with Landlock)
		}
		denied = !p.Reads.Grants(i.Path, readAccess(i.Op)) && !p.readable(i.Path)
	case i.Ino == unknownIno:
		// Existence unknown: no shortcut; and the name stays what the
		// command wrote, which no writable root names.
		denied = !pathtree.WithinAny(i.Path, p.Writable) || pathtree.WithinAny(i.Path, p.ReadOnly)
	case creates(i.Op) && i.Ino != 0, needsObject(i.Op) && i.Ino == 0:
		return Denial{}, false
	default:
		denied = !pathtree.WithinAny(i.Path, p.Writable) || pathtree.WithinAny(i.Path, p.ReadOnly)
	}
	for _, g := range p.Granted {
		if g.Path == i.Path && g.covers(i.Op) {
			denied = false
		}
	}
	if !denied && (i.Op == boundary.OpRename || i.Op == boundary.OpRemoveDir) {
		for _, pin := range p.Pinned {
			if i.Path == pin {
				denied = true
			}
		}
	}
	if !denied || noiseReads[i.Path] {
		return Denial{}, false
	}
	d := Denial{Surface: boundary.Filesystem, Operation: i.Op, Path: i.Path, Ino: i.Ino, Born: i.Born}
	if p.trustedProgram(i.Program) {
		d.Programs = []string{i.Program}
	}
	return d, true
}

// trustedProgram reports whether exe names a program the command could
// not have made or replaced: an absolute, clean path outside every
// writable root, of a file that was not deleted (a memfd or a deleted
// copy reads as "... (deleted)"). A program the command could have
// written is unknown: whatever its name, it says nothing of which tool
// ran.
func (p Policy) trustedProgram(exe string) bool {
	return exe != "" && filepath.IsAbs(exe) && filepath.Clean(exe) == exe &&
		!strings.HasSuffix(exe, " (deleted)") && !pathtree.WithinAny(exe, p.Writable)
}

// unknownIno marks an object whose existence the observer could not
// establish: the judge applies no EEXIST or ENOENT shortcut to it.
const unknownIno = ^uint64(0)

// creates reports whether op makes a new name (EEXIST when it exists).
func creates(op boundary.Operation) bool {
	switch op {
	case boundary.OpMakeDir, boundary.OpMakeReg, boundary.OpMakeSym, boundary.OpMakeFifo, boundary.OpMakeSock,
		boundary.OpMakeChar, boundary.OpMakeBlock, boundary.OpLink:
		return true
	}
	return false
}

// needsObject reports whether op acts on an existing object (ENOENT when
// there is none). A rename is judged by both its names, one of which may
// be new, so it is not one.
func needsObject(op boundary.Operation) bool {
	switch op {
	case boundary.OpWriteFile, boundary.OpTruncate, boundary.OpRemoveFile, boundary.OpRemoveDir,
		boundary.OpChmod, boundary.OpChown, boundary.OpUtime, boundary.OpXattr:
		return true
	}
	return false
}

// readable reports whether another rule of the union grants reading
// path: the writable roots (which get every right), and the helper's
// own readable roots (in a namespace, the private /proc and /dev).
func (p Policy) readable(path string) bool {
	if pathtree.WithinAny(path, p.Writable) {
		return true
	}
	if !pathtree.WithinAny(path, p.Readable) {
		return false
	}
	// Not the links of the private /proc into other views of the tree
	// (a read through /proc/N/root or /proc/N/fd/M is a read of the
	// object they name).
	parts := strings.Split(path, "/")
	return !pathtree.WithinAny(path, []string{"/proc"}) || len(parts) < 4 ||
		(parts[3] != "root" && parts[3] != "cwd" && parts[3] != "fd" && parts[3] != "map_files")
}

// readAccess is the Landlock right a read operation needs (every read
// right for one it does not know).
func readAccess(op boundary.Operation) landlock.Access {
	switch op {
	case boundary.OpReadFile:
		return landlock.AccessReadFile
	case boundary.OpReadDir:
		return landlock.AccessReadDir
	case boundary.OpExecute:
		return landlock.AccessExecute
	}
	return landlock.ReadAccess
}

// Merge adds b's denials to a's, dropping second sightings of one
// boundary (Denial.Key).
func Merge(a, b []Denial) []Denial {
	at := map[boundary.Key]int{}
	var out []Denial
	for _, d := range append(a, b...) {
		i, ok := at[d.Key()]
		if !ok {
			at[d.Key()] = len(out)
			out = append(out, d)
			continue
		}
		out[i].Programs = unionPrograms(out[i].Programs, d.Programs)
	}
	return out
}

// unionPrograms is the programs of two reports of one denial: nil (not
// known) unless both name theirs.
func unionPrograms(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// noiseReads are accesses no reviewer should see: programs probe them
// routinely and nothing useful is behind them in a sandbox. Documented in
// the README.
var noiseReads = map[string]bool{
	"/dev/tty":          true,
	"/proc/filesystems": true,
}

func noise(d Denial) bool { return d.Surface == boundary.Filesystem && noiseReads[d.Path] }

// isProbe reports whether a record is the helper's deliberate denial
// (confine's probeDomain writing /proc/self/comm), which announces the
// run's domain and marks the end of its records.
func isProbe(r landlock.Record) bool {
	return len(r.Blockers) == 1 && r.Blockers[0] == "fs.write_file" && strings.HasSuffix(r.Path, "/comm") && strings.HasPrefix(r.Path, "/proc/")
}

// dirLevel reports whether a Landlock blocker is a right on a directory
// (its records name the directory, not the entry).
func dirLevel(blocker string) bool {
	return strings.HasPrefix(blocker, "fs.make_") || strings.HasPrefix(blocker, "fs.remove_") || blocker == "fs.refer"
}

// denialOf turns one blocker of a record into a Denial.
func denialOf(r landlock.Record, blocker string) (Denial, bool) {
	kind, op, ok := strings.Cut(blocker, ".")
	if !ok {
		return Denial{}, false
	}
	switch kind {
	case "fs":
		return Denial{Surface: boundary.Filesystem, Operation: boundary.Operation(op), Path: r.Path, Dev: r.Dev, Ino: r.Ino}, r.Path != ""
	case "net":
		name := map[string]string{"connect_tcp": "connect", "bind_tcp": "bind", "connect_send_udp": "connect", "bind_udp": "bind"}[op]
		if name == "" {
			name = op
		}
		return Denial{Surface: boundary.Network, Operation: boundary.Operation(name), Destination: net.JoinHostPort(r.Daddr, strconv.Itoa(r.Dest))}, r.Daddr != ""
	}
	return Denial{}, false
}

// denialsOf turns a run's access records into denials, deduplicated, and
// counts the blockers that are no file or network access.
func denialsOf(recs []landlock.Record) (out []Denial, other int) {
	seen := map[boundary.Key]bool{}
	for _, r := range recs {
		if isProbe(r) {
			continue
		}
		for _, b := range r.Blockers {
			if dirLevel(b) {
				// Landlock names only the parent directory of a create,
				// remove, rename or link; the seccomp observer, always on,
				// reports the exact name of the same call.
				continue
			}
			den, ok := denialOf(r, b)
			if !ok {
				other++
				continue
			}
			if noise(den) || seen[den.Key()] {
				continue
			}
			seen[den.Key()] = true
			out = append(out, den)
		}
	}
	return out, other
}
