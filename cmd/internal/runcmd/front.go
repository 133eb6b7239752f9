package runcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

// The programs make build installs together, and what they agree on.
const (
	// FrontName is the lean front (cmd/sandboxd-front) people and agents
	// run as sandboxd.
	FrontName = "sandboxd"
	// CoreName is the whole of sandboxd (cmd/sandboxd).
	CoreName = "sandboxd-core"
	// RunName is the lean embedded run (cmd/sandboxd-run), which the
	// front executes for a run it does not send to the daemon itself.
	RunName = "sandboxd-run"
	// FrontStampEnv carries the build stamp of the program that executed
	// this one (the front, or sandboxd-run executing the core), which
	// FromFront removes first thing.
	FrontStampEnv = "SANDBOXD_FRONT_STAMP"
	// FrontUnstamped is the stamp of a front go build made.
	FrontUnstamped = "unstamped"
)

// FromFront reads and removes the front's stamp from the environment,
// before anything else can see it (a command must not inherit it), and
// says why this program (self: its installed name) refuses to go on (""
// when it does not): a front of another build executed it. Without the
// variable, it was run directly.
func FromFront(self string) string {
	got, ok := os.LookupEnv(FrontStampEnv)
	os.Unsetenv(FrontStampEnv)
	if !ok {
		return ""
	}
	if got == ownStamp() {
		return ""
	}
	return "sandboxd and its " + self + " are of different builds (installed apart, or one replaced); reinstall them from one build (make build builds them together)"
}

// ownStamp is this build's stamp as a front passes it.
func ownStamp() string {
	if s := sandbox.BuildStamp(); s != "" {
		return s
	}
	return FrontUnstamped
}

// coreEnv is this process's environment for the core it executes: the
// stamp the core checks, and no other.
func coreEnv() []string {
	out := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, FrontStampEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, FrontStampEnv+"="+ownStamp())
}

// OpenCore opens the core beside this executable when package sibling
// finds nothing wrong with it (who: who starts it, for the sentence
// that says why not), with its path; otherwise f is nil and why says
// why, as a sentence.
func OpenCore(who string) (f *os.File, path, why string) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return nil, CoreName, "its own executable's path cannot be read, so " + CoreName + " beside it cannot be found"
	}
	dir := filepath.Dir(self)
	path = filepath.Join(dir, CoreName)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return nil, path, "its own executable cannot be examined, so " + path + " cannot be checked"
	}
	f, why, refused := sibling.Open(dir, CoreName, int(st.Uid), os.Geteuid() == 0, who)
	switch {
	case f != nil:
		return f, path, ""
	case refused:
		return nil, path, fmt.Sprintf("sandboxd's core %s is refused: %s", path, why)
	}
	return nil, path, fmt.Sprintf("sandboxd's core %s is missing (%s); install sandboxd-core beside sandboxd (make build builds it)", path, why)
}

// ExecCore executes the core beside this executable in this process's
// place, with its argv and environment and this build's stamp; it
// returns only with the sentence that says why it could not.
func ExecCore(args []string) string {
	f, path, why := OpenCore("sandboxd starts it as whoever runs sandboxd")
	if f == nil {
		return why
	}
	defer f.Close()
	// The file checked is the one executed, through its descriptor.
	err := unix.Exec("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), args, coreEnv())
	return fmt.Sprintf("sandboxd's core %s could not be started (%s)", path, publicerr.Reason(err))
}
