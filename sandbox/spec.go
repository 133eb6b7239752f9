package sandbox

import (
	"context"
	"io"
	"net"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
)

// Isolation says how a command was contained.
type Isolation string

const (
	// Namespaces: user, mount, pid, network, IPC and UTS namespaces, plus
	// Landlock, seccomp and a pids cgroup or rlimit.
	Namespaces Isolation = "namespaces"
	// LandlockOnly: no namespaces could be created; Landlock (filesystem,
	// TCP and scopes), seccomp and rlimits only.
	LandlockOnly Isolation = "landlock-only"
)

// NetworkMode says how the network is closed.
type NetworkMode string

const (
	// NetNS: an empty network namespace with loopback up.
	NetNS NetworkMode = "netns"
	// NetLandlock: Landlock denies every TCP connect and bind; seccomp
	// refuses every other socket family and type.
	NetLandlock NetworkMode = "landlock"
)

// Spec is everything one sandboxed run needs. Paths are absolute and
// resolved; the caller (cmd/sandboxd) turns flags and policy into a Spec.
type Spec struct {
	// Argv is the command to run; Argv[0] is looked up in PATH from Env.
	Argv []string
	// Env is the command's whole environment (already scrubbed).
	Env []string
	// Dir is the command's working directory.
	Dir string
	// Workspace is the main writable root.
	Workspace string
	// Writable lists further writable roots (not the workspace, not TMPDIR).
	Writable []string
	// Caches are sandbox-private writable directories (created if missing)
	// that outlive the run, keyed to the workspace by the caller.
	Caches []string
	// CacheLayers are tool caches inside Caches that may show the
	// caller's own host cache, read-only, as the lower layer of an
	// overlay whose upper layer is the private cache (namespaces only;
	// see CacheLayer). Result.Caches says what each one was.
	CacheLayers []CacheLayer
	// HostCaches decide, with the rest of the Spec, whether each cache
	// layer's host cache may be its lower layer.
	HostCaches HostCacheRules
	// Read lists the hierarchies the command may read and execute
	// (normally just "/").
	Read []string
	// Deny lists paths carved out of Read (last element may be a glob).
	Deny []string
	// ListCarved lets the command list the directories above denied paths
	// ("/", "~"), and through Landlock's inheritance every directory
	// beneath them, denied ones included (names, not contents). The strict
	// profile turns it off.
	ListCarved bool
	// Protected lists persistence name patterns (package persist's
	// built-in ones and the policy's own); they apply at every depth, and
	// git directories are found by what git takes for one.
	Protected []string
	// GitConfigs are the caller's own git config files (~/.gitconfig and
	// the XDG one): their core.hooksPath and includes reach into
	// every repository.
	GitConfigs []string
	// UID, GID and Groups are the caller's ids and supplementary groups:
	// the command runs as them (a caller whose UID is 0 runs as HostUID
	// through a user namespace), and what the supervisor makes, opens or
	// writes for the run (state, caches, granted files, quarantine) it
	// does with them (package fsid), so the kernel decides what the
	// caller may use and what is made is the caller's. They never come
	// from the process running sandboxd.
	UID, GID int
	Groups   []int
	// Umask is the caller's: without a layer, a directory the command
	// creates is left with no group/other write the umask masks; what the
	// supervisor creates for the caller gets no bit it masks.
	Umask uint32
	// Home is the caller's home directory. When the caller is root and
	// the command runs as an unprivileged host uid, Home is mounted
	// read-only with an id mapping so the command can read what its user
	// could read (secrets stay denied by Landlock).
	Home string
	// StateDir is sandboxd's state directory (caches, compiled filters,
	// quarantine); it is never readable from inside.
	StateDir string
	// Limits bound the command's resources.
	Limits Limits
	// Isolation: "" or "auto" picks namespaces when possible;
	// Namespaces requires them; LandlockOnly skips them.
	Isolation string
	// Timeout, if non-zero, ends the command: SIGTERM to every process,
	// then SIGKILL after KillGrace.
	Timeout   time.Duration
	KillGrace time.Duration
	// HostUID and HostGID are the host ids the command runs as when the
	// caller is root (default 100000).
	HostUID, HostGID int

	// Exceptions are granted accesses this run adds, exactly (a retry
	// after a review).
	Exceptions []Exception
	// Transaction puts the workspace behind a copy-on-write layer of at
	// most LayerSize bytes: the command's writes, deletes and renames in
	// the workspace land in the layer (Result.Layer), which the caller
	// commits or discards. It needs a mount namespace; without one the
	// run writes straight through and Result.Transaction says why.
	// Persistence paths are then checked at commit instead of being bound
	// read-only during the run.
	Transaction bool
	LayerSize   int64
	// NoDetect turns boundary detection off: no kernel audit, no
	// observed calls. Enforcement is unchanged; denials are simply not
	// reported, so none can be reviewed.
	NoDetect bool
	// ReadOnly makes a run that only reads: the workspace, the further
	// writable roots and the caches keep their read rules but lose every
	// right to change them, so the command sees what a run of the same
	// Spec would see and can leave nothing behind. Transaction is then
	// ignored: there is no layer to commit and no persistence plan or
	// sweep (which, beside another run of the same workspace, could
	// take that run's files for this one's). Exceptions must not write.
	ReadOnly bool

	// Copies are files shown inside in place of the caller's own (a
	// config that mixes settings and credentials, with the credentials
	// removed): each Path, an existing file, reads as Data, read-only,
	// while the original stays unreadable. Namespaces only.
	Copies []Copy
	// Egress, if set, is the run's one way out: a proxy the command
	// reaches on its own loopback (only with a network namespace).
	Egress *Egress
	// RuntimeDir is the caller's XDG_RUNTIME_DIR (sockets of its session
	// services), masked with an empty tmpfs inside.
	RuntimeDir string
	// OnWatch, if set, is called once, while the command runs, when it
	// first makes an inotify instance in a transactional run: it watches
	// files, and behind the layer its own writes reach the workspace only
	// when it exits, and its watches see none of the edits made outside.
	// It must not block.
	OnWatch func()
	// Audit, if set, is the process's reader of kernel audit records,
	// which concurrent runs share; nil: the run reads kernel audit
	// itself, for as long as it runs.
	Audit *AuditHub
	// Ready, if set, holds helpers started in advance (a daemon's);
	// nil: the run starts its own.
	Ready *ReadyHelpers
	// Releases, if set, takes over the release of a run's kernel objects
	// once its command has ended (a daemon's: Run returns sooner, see
	// Run); nil: Run releases everything before it returns.
	Releases *Releases
	// Filters, if set, keeps the compiled seccomp programs the runs share
	// (a daemon's); nil: the run reads the caller's cache.
	Filters *Filters
	// Helper, if set, is the separate helper binary (sandboxd-helper),
	// open (O_PATH is enough) under the path it was found at (its Name),
	// and already judged trustworthy by the caller, that path's
	// directories included: the run executes that path and then checks
	// that the process runs this very file (helperPath, sameBinary). It
	// must be of this build (wire's stamp): a helper of another build
	// refuses the run. Nil: this process's own executable
	// (/proc/self/exe) is the helper.
	Helper *os.File
	// Signals, if set, are forwarded to the command's process tree while
	// it runs; the caller decides which signals reach it (the CLI relays
	// its own SIGINT, SIGTERM, ...; a daemon a client's request).
	Signals <-chan os.Signal

	// Stdin, Stdout and Stderr are the command's; Stderr also gets the
	// one-line reason when the command cannot be run (126, 127). A Stdin
	// that is a socket is copied through a pipe (a socket of the host's
	// network could be connected anywhere from inside), until the command
	// is gone. A Stdin that is not an *os.File is copied to the command, and Run returns
	// only once that copy has ended: its Read must return (EOF, or an
	// error after the caller closes it) once the command is gone, as a
	// daemon's client stream does when the request ends.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Pipes are the write ends of pipes the command gets as descriptors
	// 3, 4, ...: a way out for what a front end must learn from inside
	// (the directory a shell ended in). Run refuses any other kind of
	// file: a descriptor of a file or directory would reach past the
	// ruleset.
	Pipes []*os.File
}

// caller is the caller's file-system identity.
func (s *Spec) caller() fsid.ID {
	return fsid.ID{UID: s.UID, GID: s.GID, Groups: s.Groups, Umask: s.Umask}
}

// sweepSpec is what package persist's sweep needs to know of the run:
// what the command writes unchecked outside the workspace (the extra
// writable roots and the private caches) included.
func (s *Spec) sweepSpec() persist.SweepSpec {
	return persist.SweepSpec{Workspace: s.Workspace, Owner: s.UID, Umask: s.Umask, Protected: s.Protected,
		Unguarded: append(append([]string(nil), s.Writable...), s.Caches...), Home: s.Home, GitConfigs: s.GitConfigs}
}

// Limits bound a run.
type Limits struct {
	Pids     int64 // tasks (processes and threads)
	Memory   int64 // bytes
	FileSize int64 // bytes, largest file the command may write
	TmpSize  int64 // bytes, private /tmp
}

// Result is what happened.
type Result struct {
	// ExitCode follows sandboxd's contract: the command's status,
	// 128+N when killed by signal N, 124 on timeout.
	ExitCode int
	// Signal is the signal that ended the command, if any.
	Signal int
	// TimedOut reports that Timeout fired.
	TimedOut    bool
	LandlockABI int
	Isolation   Isolation
	NetworkMode NetworkMode
	// Egress says how the command could reach the network: "proxy", or
	// "none" with EgressWhy.
	Egress, EgressWhy string
	// Capture says how a connect straight to an address off loopback
	// fared with Egress "proxy": "on" (captured and decided by the
	// proxy), or "off" with CaptureWhy (refused and reported).
	Capture, CaptureWhy string
	// Degraded lists what this run could not enforce and why (empty when
	// fully isolated).
	Degraded []string
	// Containment names the mechanism that bounded the process count.
	Containment string
	// Persistence lists what the persistence rules did after a run written
	// straight to the workspace: paths moved out of it, paths kept but
	// listed for the person, modes narrowed.
	Persistence []Persisted
	// Setup is how long preparing the sandbox took.
	Setup time.Duration
	// Denials are the accesses the kernel refused the command, exactly,
	// deduplicated; Detection says how they were observed and whether any
	// were lost.
	Denials   []Denial
	Detection Detection
	// Refused are the classes of calls the command made that the sandbox
	// refuses by design, with counts: not denials, since nothing can
	// grant one. Seen only while detection runs (NoDetect: none).
	Refused []Refused
	// Layer holds the attempt's workspace writes when the run was
	// transactional; the caller must Commit or Close it. Transaction says
	// which mode ran and, when it is "none", why.
	Layer       *Layer
	Transaction Transaction
	// Caches says, for each of Spec.CacheLayers, whether the host cache
	// was its lower layer, and why not.
	Caches []CacheResult
	// Limits are the limits the command ran into (empty: none seen).
	Limits []LimitHit
	// Warnings are what the person should know about this attempt, each
	// a sentence (a workspace group the layer cannot hold, say).
	Warnings []string
}

// LimitHit is one resource limit the command ran into.
type LimitHit struct {
	// Limit is memory (the run was stopped there), pids (a fork failed),
	// file_size (a process was killed by SIGXFSZ), tmp (/tmp, /var/tmp or
	// /dev/shm filled up) or layer (the workspace's layer filled up).
	Limit string `json:"limit"`
	// Value is the limit, in bytes or tasks; Key is the policy key that
	// raises it.
	Value int64  `json:"value"`
	Key   string `json:"key"`
	// Writing are the files open for writing when the memory limit
	// stopped the run, as the command named them: they may be cut short.
	Writing []string `json:"writing,omitempty"`
}

// CacheLayer is one private tool cache whose host counterpart may be
// its read-only lower layer. The private writes persist in the cache
// root's ".layers/NAME" directory (hidden inside), which an older
// sandboxd's populated Dir becomes once; without a lower layer (none
// given, or the kernel refuses the overlay) the command sees that
// private cache alone, as before.
type CacheLayer struct {
	// Name names the cache in the report and its layer directory:
	// lowercase letters, digits and "-" ("go-build", "npm").
	Name string
	// Dir is the private cache the command's environment names:
	// absolute, clean, strictly below one of Spec.Caches.
	Dir string
	// Host is the host cache as the caller's environment and files name
	// it: absolute and clean; "" for none, and then Why says why. The run
	// decides whether it may be the lower layer (caches.go: resolved, only
	// where the command could read it anyway, with the deny entries below
	// it hidden inside, with HostCacheRules).
	Host string
	// Why says why there is no Host.
	Why string
}

// HostCacheRules are the caller's facts that, with the rest of the Spec,
// decide whether a host cache may be a cache layer's lower layer.
type HostCacheRules struct {
	// Secrets are the policy's secrets: a host cache that is one, or
	// lies inside one, is never shown.
	Secrets []string
	// Whole are directories a host cache must not be or hold: the home
	// and the XDG cache directory (never all of them).
	Whole []string
	// Apart are roots, beyond the Spec's workspace, writable roots,
	// caches, state and runtime directories, that a host cache must
	// neither be in nor hold: sandboxd's configuration directory.
	Apart []string
}

// CacheResult is what one cache layer was in a run.
type CacheResult struct {
	Name string `json:"name"`
	// Lower is the host cache shown read-only beneath the private one,
	// when it was.
	Lower string `json:"lower,omitempty"`
	// Private is the private cache's path (what the environment names).
	Private string `json:"private"`
	// Why says why the host cache was not its lower layer.
	Why string `json:"why,omitempty"`
	// Discarded: another run of the workspace held the private cache, so
	// this run's writes to it went to a layer dropped at its end.
	Discarded bool `json:"writes_discarded,omitempty"`
}

// Transaction says how the workspace was written.
type Transaction struct {
	Mode string `json:"mode"` // "layer" or "none"
	Why  string `json:"why,omitempty"`
}

// Layer is one attempt's copy-on-write layer: a tmpfs that only the
// supervisor still holds once the command has ended. Its "upper"
// directory holds what the attempt changed in the workspace, in overlayfs
// form (whiteouts, opaque directories marked with user.overlay.opaque).
type Layer struct {
	// Root is the layer's file system.
	Root *os.File
	// Started is the coarse wall-clock time taken before the attempt
	// began: anything in the workspace with a later change time was
	// changed from outside while the attempt ran.
	Started time.Time
	// Files the command created are owned in the layer by HostUID and
	// HostGID; in the workspace they belong to UID and GID.
	HostUID, HostGID, UID, GID int
	// releases, if set, discards the layer after Close returns (its
	// file system is private: nothing sees it go).
	releases *Releases
}

// Close discards the layer: now, or with Spec.Releases in the
// background (the unmount waits for the kernel's teardown of the run's
// namespaces, still under way).
func (l *Layer) Close() error {
	if l == nil || l.Root == nil {
		return nil
	}
	if root := l.Root; l.releases.later(func() { root.Close() }) {
		return nil
	}
	return l.Root.Close()
}

// Persisted is one thing the persistence rules did about a path the
// command left in the workspace (package persist's: the sweep is its).
type Persisted = persist.Persisted

// Egress is the way out a run's proxy gives the command. With a network
// namespace the helper listens on 127.0.0.1:Port inside it and the
// supervisor hands that listener to Serve for the attempt; without one
// there is no egress at all (Landlock's TCP rules name ports, not hosts,
// so they could not limit a connect to the proxy), and Result says so.
type Egress struct {
	// Port is the proxy's port on the namespace's loopback.
	Port uint16
	// Env is added to the command's environment when the proxy is
	// reachable (HTTP_PROXY and friends).
	Env []string
	// Serve serves one attempt's listener until ctx is done, then closes
	// everything it accepted. inside connects to the namespace's own
	// loopback (a server the command listens with); it is safe for
	// concurrent use until Serve returns.
	Serve func(ctx context.Context, ln net.Listener, inside Dialer) error
	// Capture, when set, captures every TCP connect the command makes
	// to an address off the namespace's loopback and serves each
	// attempt's capture listeners with it (until ctx is done); DNS then
	// serves the stub resolver's socket on 127.0.0.1:53, and the command
	// sees an /etc/resolv.conf naming it and an /etc/hosts holding only
	// the loopback names and its host name. Both are needed together:
	// a name the stub answered is only reachable through capture.
	Capture func(ctx context.Context, ln net.Listener, inside Dialer) error
	DNS     func(ctx context.Context, pc net.PacketConn) error
	// SOCKS, when set, serves each attempt's SOCKS5 listener, at
	// 127.0.0.1:Port+2 inside (Env advertises it).
	SOCKS func(ctx context.Context, ln net.Listener, inside Dialer) error
}

// captures reports whether e asks for capture (nil asks for nothing).
func (e *Egress) captures() bool { return e != nil && e.Capture != nil && e.DNS != nil }

// Dialer connects to an address.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Copy is a file shown in place of another (see Spec.Copies).
type Copy struct {
	Path string // absolute, clean: the file it stands in for
	Data []byte
}

// BuildStamp is this build's stamp ("" unstamped), which sandboxd and a
// separate helper binary must share (Spec.Helper): an unstamped build
// runs itself as its helper.
func BuildStamp() string { return wire.Stamp() }
