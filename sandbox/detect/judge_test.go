package detect

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/landlock"
)

// policy is a run as sandbox.Run describes it to the judge: a workspace
// with a read-only hook directory and a pinned .git, the private /tmp
// and a device node writable, one granted file outside, reads carved out
// of "/" with one allowed directory inside a denied home.
func policy() Policy {
	return Policy{
		Writable: []string{"/ws", "/cache", "/tmp", "/dev/null"},
		ReadOnly: []string{"/ws/.git/hooks", "/ws/.git/config"},
		Pinned:   []string{"/ws/.git"},
		Granted:  []Grant{{Operation: "write_file", Path: "/etc/granted"}, {Operation: "make_reg", Path: "/etc/new"}, {Operation: "execute", Path: "/opt/tool"}},
		Reads:    reads(false, "/home/u", "/etc/ssh/ssh_host_*_key"),
		Readable: []string{"/proc", "/dev"},
		NetNS:    true,
	}
}

// readDeny is policy()'s deny list.
var readDeny = []string{"/home/u", "/etc/ssh/ssh_host_*_key"}

// reads is the carve-out of "/" and one allowed directory inside a
// denied home (its roots taken as resolved: these paths are made up).
func reads(list bool, deny ...string) landlock.Carveout {
	return landlock.NewCarveout([]landlock.Root{{Path: "/", Real: "/"}, {Path: "/home/u/go", Real: "/home/u/go"}}, deny, list)
}

func TestRefused(t *testing.T) {
	fs := func(op boundary.Operation, path string) []Denial {
		return []Denial{{Surface: "filesystem", Operation: op, Path: path, Ino: 7}}
	}
	// fsNew is a refused create: the name did not exist.
	fsNew := func(op boundary.Operation, path string) []Denial {
		return []Denial{{Surface: "filesystem", Operation: op, Path: path}}
	}
	for _, tc := range []struct {
		name string
		edit func(*Policy)
		in   Intent
		want []Denial
	}{
		// Writes.
		{"write inside the workspace", nil, Intent{Op: "write_file", Path: "/ws/a.go", Ino: 7}, nil},
		{"create deep inside the workspace", nil, Intent{Op: "make_reg", Path: "/ws/x/y/z", Ino: 7}, nil},
		{"write in a cache", nil, Intent{Op: "write_file", Path: "/cache/go-build/x", Ino: 7}, nil},
		{"write in the private /tmp", nil, Intent{Op: "write_file", Path: "/tmp/x", Ino: 7}, nil},
		{"write to a device node", nil, Intent{Op: "write_file", Path: "/dev/null", Ino: 7}, nil},
		{"write outside", nil, Intent{Op: "write_file", Path: "/etc/passwd", Ino: 7}, fs("write_file", "/etc/passwd")},
		{"a name that only starts like a root", nil, Intent{Op: "make_reg", Path: "/wsx/a"}, fsNew("make_reg", "/wsx/a")},
		// What the kernel answers before the sandbox is asked.
		{"mkdir -p of an existing directory outside (EEXIST)", nil, Intent{Op: "make_dir", Path: "/usr/bin", Ino: 7}, nil},
		{"mkdir of a new directory outside", nil, Intent{Op: "make_dir", Path: "/usr/new"}, fsNew("make_dir", "/usr/new")},
		{"symlink over an existing name outside (EEXIST)", nil, Intent{Op: "make_sym", Path: "/etc/hosts", Ino: 7}, nil},
		{"write to a missing file outside without O_CREAT (ENOENT)", nil, Intent{Op: "write_file", Path: "/etc/missing"}, nil},
		{"remove a missing file outside (ENOENT)", nil, Intent{Op: "remove_file", Path: "/etc/missing"}, nil},
		{"chmod a missing file outside (ENOENT)", nil, Intent{Op: "chmod", Path: "/etc/missing"}, nil},
		{"rename to a new name outside", nil, Intent{Op: "rename", Path: "/etc/new-name"}, fsNew("rename", "/etc/new-name")},
		{"a walk through another process's fd link: existence unknown, judged", nil, Intent{Op: "write_file", Path: "/proc/7/fd/4/.bashrc", Ino: unknownIno},
			[]Denial{{Surface: "filesystem", Operation: "write_file", Path: "/proc/7/fd/4/.bashrc", Ino: unknownIno}}},
		{"existence unknown inside the workspace", nil, Intent{Op: "write_file", Path: "/ws/x", Ino: unknownIno}, nil},
		{"a read through another process's root link is not judged here (audit sees it for root callers)", func(p *Policy) { p.ReadsObserved = true }, Intent{Op: "read_file", Path: "/proc/7/root/home/u/.ssh/id_rsa", Ino: 7}, nil},
		{"a pipe reopened through /dev/stdout", nil, Intent{Op: "write_file", Path: "pipe:[4711]", Ino: 7}, nil},
		{"a socket reopened through /proc/self/fd", nil, Intent{Op: "write_file", Path: "socket:[4712]", Ino: 7}, nil},
		{"remove outside", nil, Intent{Op: "remove_file", Path: "/usr/bin/ls", Ino: 7}, fs("remove_file", "/usr/bin/ls")},
		{"chmod outside", nil, Intent{Op: "chmod", Path: "/etc/shadow", Ino: 7}, fs("chmod", "/etc/shadow")},
		// Read-only and pinned paths inside the workspace.
		{"write a read-only hook", nil, Intent{Op: "make_reg", Path: "/ws/.git/hooks/pre-commit"}, fsNew("make_reg", "/ws/.git/hooks/pre-commit")},
		{"write the read-only config", nil, Intent{Op: "write_file", Path: "/ws/.git/config", Ino: 7}, fs("write_file", "/ws/.git/config")},
		{"write next to the read-only config", nil, Intent{Op: "write_file", Path: "/ws/.git/index", Ino: 7}, nil},
		{"rename a pinned directory", nil, Intent{Op: "rename", Path: "/ws/.git", Ino: 7}, fs("rename", "/ws/.git")},
		{"remove a pinned directory", nil, Intent{Op: "remove_dir", Path: "/ws/.git", Ino: 7}, fs("remove_dir", "/ws/.git")},
		{"write into a pinned directory", nil, Intent{Op: "make_reg", Path: "/ws/.git/ORIG_HEAD", Ino: 7}, nil},
		{"rename below a pinned directory", nil, Intent{Op: "rename", Path: "/ws/.git/refs/x", Ino: 7}, nil},
		// Granted exceptions.
		{"granted write", nil, Intent{Op: "write_file", Path: "/etc/granted", Ino: 7}, nil},
		{"granted write does not truncate", nil, Intent{Op: "truncate", Path: "/etc/granted", Ino: 7}, fs("truncate", "/etc/granted")},
		{"granted create writes and truncates", nil, Intent{Op: "truncate", Path: "/etc/new", Ino: 7}, nil},
		{"granted execute reads", func(p *Policy) { p.ReadsObserved = true; p.Reads = reads(false, append(readDeny, "/opt")...) }, Intent{Op: "read_file", Path: "/opt/tool", Ino: 7}, nil},
		{"a grant is for its path only", nil, Intent{Op: "write_file", Path: "/etc/granted2", Ino: 7}, fs("write_file", "/etc/granted2")},
		// Reads.
		{"read with audit: audit reports it", nil, Intent{Op: "read_file", Path: "/home/u/.ssh/id_rsa", Ino: 7}, nil},
		{"observed read of a denied path", observeReads, Intent{Op: "read_file", Path: "/home/u/.ssh/id_rsa", Ino: 7}, fs("read_file", "/home/u/.ssh/id_rsa")},
		{"observed read of a denied directory", observeReads, Intent{Op: "read_dir", Path: "/home/u", Ino: 7}, fs("read_dir", "/home/u")},
		{"observed read of an allowed root inside a denied one", observeReads, Intent{Op: "read_file", Path: "/home/u/go/pkg/x", Ino: 7}, nil},
		{"observed read matching a denied glob", observeReads, Intent{Op: "read_file", Path: "/etc/ssh/ssh_host_ed25519_key", Ino: 7}, fs("read_file", "/etc/ssh/ssh_host_ed25519_key")},
		{"observed read beside a denied glob", observeReads, Intent{Op: "read_file", Path: "/etc/ssh/ssh_config", Ino: 7}, nil},
		{"observed execute of a denied path", observeReads, Intent{Op: "execute", Path: "/home/u/bin/x", Ino: 7}, fs("execute", "/home/u/bin/x")},
		{"observed read of a missing file", observeReads, Intent{Op: "read_file", Path: "/home/u/nothing"}, nil},
		{"observed read of another home", observeReads, Intent{Op: "read_file", Path: "/home/u2/x", Ino: 7}, nil},
		// Listing: a directory above a denied path, and every directory
		// below it, may be listed exactly when carved directories may be
		// (the default profile), as the kernel's carve-out decides.
		{"observed listing above a denied path (strict)", observeReads, Intent{Op: "read_dir", Path: "/home", Ino: 7}, fs("read_dir", "/home")},
		{"observed listing above a denied path (default)", func(p *Policy) { p.ReadsObserved = true; p.Reads = reads(true, readDeny...) },
			Intent{Op: "read_dir", Path: "/home", Ino: 7}, nil},
		{"observed listing of a denied directory (default)", func(p *Policy) { p.ReadsObserved = true; p.Reads = reads(true, readDeny...) },
			Intent{Op: "read_dir", Path: "/home/u/.ssh", Ino: 7}, nil},
		{"observed read in a denied directory (default)", func(p *Policy) { p.ReadsObserved = true; p.Reads = reads(true, readDeny...) },
			Intent{Op: "read_file", Path: "/home/u/.ssh/id_rsa", Ino: 7}, fs("read_file", "/home/u/.ssh/id_rsa")},
		// The union of rules: a writable root below a denied path is
		// readable (sandboxd's own private caches under its state).
		{"observed read of a private cache below a denied directory", func(p *Policy) {
			p.ReadsObserved = true
			p.Writable = append(p.Writable, "/home/u/.local/state/sandboxd/cache/ab12")
		}, Intent{Op: "read_file", Path: "/home/u/.local/state/sandboxd/cache/ab12/go-build/00/x-d", Ino: 7}, nil},
		{"observed read of sandboxd's state beside the cache", func(p *Policy) {
			p.ReadsObserved = true
			p.Writable = append(p.Writable, "/home/u/.local/state/sandboxd/cache/ab12")
		}, Intent{Op: "read_file", Path: "/home/u/.local/state/sandboxd/breaker/x.json", Ino: 7}, fs("read_file", "/home/u/.local/state/sandboxd/breaker/x.json")},
		{"observed read of the private /proc", func(p *Policy) { p.ReadsObserved = true; p.Reads = reads(false, append(readDeny, "/proc")...) }, Intent{Op: "read_file", Path: "/proc/self/status", Ino: 7}, nil},
		// Noise.
		{"noise write", nil, Intent{Op: "write_file", Path: "/dev/tty", Ino: 7}, nil},
		// Connects.
		{"connect out in netns", nil, Intent{Op: "connect", Destination: "93.184.215.14:443"}, []Denial{{Surface: "network", Operation: "connect", Destination: "93.184.215.14:443"}}},
		{"connect to a loopback server inside", nil, Intent{Op: "connect", Destination: "127.0.0.1:8080", Inside: true}, nil},
		// In netns mode the loopback is the namespace's own: a connect
		// before a server listens is an ordinary ECONNREFUSED.
		{"connect to loopback with nothing listening on either side", nil, Intent{Op: "connect", Destination: "127.0.0.1:8080"}, nil},
		{"connect to IPv6 loopback with nothing listening on either side", nil, Intent{Op: "connect", Destination: "[::1]:9"}, nil},
		{"connect to a host loopback server", nil, Intent{Op: "connect", Destination: "127.0.0.1:5432", Host: true},
			[]Denial{{Surface: "network", Operation: "connect", Destination: "127.0.0.1:5432"}}},
		{"connect to a port both sides serve reaches the run's own", nil, Intent{Op: "connect", Destination: "127.0.0.1:8080", Inside: true, Host: true}, nil},
		// Reported in the broker's one spelling of the destination.
		{"connect to loopback in landlock mode", func(p *Policy) { p.NetNS = false }, Intent{Op: "connect", Destination: "[::1]:22", Inside: true}, []Denial{{Surface: "network", Operation: "connect", Destination: "127.0.0.1:22"}}},
		{"connect off loopback with capture", func(p *Policy) { p.Captured = true }, Intent{Op: "connect", Destination: "93.184.216.34:443"}, nil},
		{"connect off loopback without capture", nil, Intent{Op: "connect", Destination: "[2606:2800::1]:443"}, []Denial{{Surface: "network", Operation: "connect", Destination: "[2606:2800::1]:443"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy()
			if tc.edit != nil {
				tc.edit(&p)
			}
			if got := p.Refused([]Intent{tc.in}); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Refused(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func observeReads(p *Policy) { p.ReadsObserved = true }

func TestReadDenied(t *testing.T) {
	r := Policy{ReadsObserved: true, Reads: reads(false, "/home/u/.ssh", "/home/u", "/etc/ssh/ssh_host_*_key")}
	for p, want := range map[string]bool{
		"/home/u/.ssh/id_rsa":           true,
		"/home/u/notes":                 true,
		"/home/u/go/pkg/x":              false, // explicitly granted inside a denied home
		"/etc/ssh/ssh_host_ed25519_key": true,
		"/etc/ssh/ssh_config":           false,
		"/usr/bin/ls":                   false,
		"/home/u2/x":                    false,
		"/home/u/go/../.ssh/id_rsa":     true,
	} {
		if got := !r.Reads.Grants(filepath.Clean(p), landlock.AccessReadFile); got != want {
			t.Errorf("denied(%s) = %v, want %v", p, got, want)
		}
	}
}

func TestMerge(t *testing.T) {
	w := Denial{Surface: "filesystem", Operation: "write_file", Path: "/etc/x", Ino: 1}
	wAgain := Denial{Surface: "filesystem", Operation: "write_file", Path: "/etc/x", Ino: 2} // the same boundary, seen twice
	tr := Denial{Surface: "filesystem", Operation: "truncate", Path: "/etc/x"}
	c := Denial{Surface: "network", Operation: "connect", Destination: "h:1"}
	mk := func(programs ...string) Denial {
		d := Denial{Surface: "filesystem", Operation: "make_dir", Path: "/h/.config"}
		if len(programs) > 0 {
			d.Programs = programs
		}
		return d
	}
	for _, tc := range []struct {
		name string
		a, b []Denial
		want []Denial
	}{
		{"empty", nil, nil, nil},
		{"audit only", []Denial{w}, nil, []Denial{w}},
		{"observed only", nil, []Denial{c}, []Denial{c}},
		{"the same access from both keeps the first", []Denial{w}, []Denial{wAgain}, []Denial{w}},
		{"another operation on the same path stays", []Denial{w}, []Denial{tr, c}, []Denial{w, tr, c}},
		{"duplicates within one side go", []Denial{w, wAgain, c, c}, nil, []Denial{w, c}},
		{"the programs of one access join", nil, []Denial{mk("/a/go"), mk("/a/vet"), mk("/a/go")}, []Denial{mk("/a/go", "/a/vet")}},
		{"one unknown program makes them unknown", nil, []Denial{mk("/a/go"), mk()}, []Denial{mk()}},
		{"audit names no program", []Denial{mk()}, []Denial{mk("/a/go")}, []Denial{mk()}},
	} {
		if got := Merge(tc.a, tc.b); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Merge = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDenialsOf(t *testing.T) {
	rec := func(path string, blockers ...string) landlock.Record {
		return landlock.Record{Type: landlock.AuditAccess, Domain: "d", Blockers: blockers, Path: path, Ino: 3}
	}
	recs := []landlock.Record{
		rec("/proc/12/comm", "fs.write_file"),    // the helper's probe
		rec("/etc/x", "fs.write_file"),           // a boundary
		rec("/etc/x", "fs.write_file"),           // the same one again
		rec("/etc", "fs.make_reg"),               // names only the parent: the observer reports it
		rec("/dev/tty", "fs.read_file"),          // noise
		rec("/root/.ssh/id_rsa", "fs.read_file"), // a read
		{Type: landlock.AuditAccess, Blockers: []string{"net.connect_tcp"}, Daddr: "127.0.0.1", Dest: 18081},
		{Type: landlock.AuditAccess, Blockers: []string{"scope.signal"}, Opid: 27690},
	}
	got, other := denialsOf(recs)
	want := []Denial{
		{Surface: "filesystem", Operation: "write_file", Path: "/etc/x", Ino: 3},
		{Surface: "filesystem", Operation: "read_file", Path: "/root/.ssh/id_rsa", Ino: 3},
		{Surface: "network", Operation: "connect", Destination: "127.0.0.1:18081"},
	}
	if !reflect.DeepEqual(got, want) || other != 1 {
		t.Errorf("denialsOf = %+v, other %d; want %+v, other 1", got, other, want)
	}
}

// A denial names the program that made it only when the command could
// not have made or replaced that program: not one under a writable
// root, not a deleted file or a memfd.
func TestRefusedNamesTrustedPrograms(t *testing.T) {
	p := Policy{Writable: []string{"/w", "/tmp"}}
	for _, tc := range []struct {
		exe  string
		want []string
	}{
		{"/usr/local/go/bin/go", []string{"/usr/local/go/bin/go"}},
		{"/usr/bin/top", []string{"/usr/bin/top"}},
		{"/w/bin/go", nil},
		{"/tmp/top", nil},
		{"/usr/bin/top (deleted)", nil},
		{"/memfd:pkg/tool/a_b/go (deleted)", nil},
		{"top", nil},
		{"/usr/bin/../bin/top", nil},
		{"", nil},
	} {
		d, ok := p.refused(Intent{Op: "make_dir", Path: "/home/u/.config", Program: tc.exe})
		if !ok {
			t.Fatalf("%s: make_dir outside the writable roots was not refused", tc.exe)
		}
		if !reflect.DeepEqual(d.Programs, tc.want) {
			t.Errorf("%q: programs %q, want %q", tc.exe, d.Programs, tc.want)
		}
	}
}
