// Command sandboxd-front is the program people and agents run as
// `sandboxd` (make build installs it as bin/sandboxd): a lean front that
// does one thing itself, `sandboxd run` through the daemon, and hands
// every other command line on by executing, in its place (the same pid,
// argv, environment, descriptors and signals, no child), the lean
// embedded run for a run (bin/sandboxd-run, cmd/sandboxd-run, when it is
// installed) and sandboxd's core for the rest (bin/sandboxd-core, built
// from cmd/sandboxd).
//
// Why: an agent's every command starts this process, and every package
// it links initialises again at each start. The core links the model
// client, the HTTP server and TLS, nftables and Prometheus (4 ms of
// package initialisation, twice that in CPU); a run through the daemon
// uses none of them. The front links only what such a run needs:
// runflags (the same flags, parsed alike), daemon/client (the wire, the
// socket's checks, a small HTTP/1.1 client) and termfilter.
//
// It takes a run itself exactly when the core would send it through the
// daemon, and the request could be made: --daemon, or a socket that is
// there without --no-daemon and no person to ask at a terminal; the
// flags parse, the intent file reads, the caller is described and the
// daemon connects. Anything else, a failure before the request included,
// goes to sandboxd-run (or the core), which decides and says it as the
// core always has (so what is printed stays the core's own). The daemon renders the run's events
// as text for it (runtext), so its stderr is byte for byte the core's.
//
// Each must be the front's own build: it lies beside the front's
// executable, owned by root or the front's owner, and nobody else may
// write it or any directory above it (package sibling, as the helper is
// checked); the front passes its build stamp (SANDBOXD_FRONT_STAMP),
// which each removes from its environment first thing, refusing a front
// of another build. The core names the front (sandboxd beside it)
// wherever it writes its own path for later (the agents' hooks).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

// stamp is the build's stamp (make build sets it, as it sets the core's
// and the helper's); "" for go build.
var stamp string

// Names the core shares with the front (a test holds them equal to the
// core's own).
const (
	coreName        = "sandboxd-core"
	runName         = "sandboxd-run"
	stampEnv        = "SANDBOXD_FRONT_STAMP"
	unstamped       = "unstamped"
	claudeShellName = "sandboxd-claude-code-shell"
)

func main() {
	if code, ok := runHere(os.Args); ok {
		os.Exit(code)
	}
	fmt.Fprintf(os.Stderr, "sandboxd: %s\n", execNext(os.Args))
	os.Exit(125)
}

// execNext executes, in this process's place, the program that takes a
// command line the front does not: sandboxd-run for a run (embedded, or
// through the daemon when the front could not make the request), the
// core for the rest, and for a run when sandboxd-run is not installed.
// It returns only with the sentence that says why it could not.
func execNext(args []string) string {
	if filepath.Base(args[0]) != claudeShellName && len(args) >= 2 && args[1] == "run" {
		if why, missing := execSibling(args, runName); !missing {
			return why
		}
	}
	why, _ := execSibling(args, coreName)
	return why
}

// runHere runs a `sandboxd run` through the daemon, when it is one this
// process takes (ok); otherwise it has done nothing.
func runHere(args []string) (code int, ok bool) {
	if filepath.Base(args[0]) == claudeShellName || len(args) < 2 || args[1] != "run" {
		return 0, false
	}
	// The signals a person sends sandboxd go to the run from the start,
	// as the core takes them at its start: one that comes while the run
	// is being prepared ends it with a report (daemonrun).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	r, ok := prepare(context.Background(), args[2:], os.Getenv)
	if !ok {
		signal.Stop(sigs)
		endAsSignalled(sigs)
		return 0, false
	}
	// The signals stay taken to the end: the process exits with the
	// run's status next, and signal.Stop (a round trip to the runtime's
	// signal thread for each of them, 0.1 to 0.6 ms measured) would only
	// let a signal that comes meanwhile end it as if the run had not.
	// Only 0-2 of what sandboxd inherited reach a command it starts
	// (notify-send); a core executed instead inherits everything.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	return r.Do(context.Background(), os.Getenv, os.Stdin, os.Stdout, os.Stderr, sigs), true
}

// endAsSignalled ends this process as the first signal taken while the
// front decided would have (its default action), before the core is
// executed: a signal the front took would otherwise be lost to the
// core, which would then run the command as if none had come. Nothing
// has run yet, so ending here is what the signal asked for.
func endAsSignalled(sigs <-chan os.Signal) {
	select {
	case s := <-sigs:
		sig, ok := s.(unix.Signal)
		if !ok || sig == unix.SIGWINCH {
			return // ignored by default: nothing to end
		}
		signal.Reset(sig)
		unix.Kill(os.Getpid(), sig)
		time.Sleep(time.Second) // the default action ends the process meanwhile
	default:
	}
}

// execSibling executes name (the core, or sandboxd-run) beside this
// executable in this process's place, with its argv and environment
// (and the stamp it checks); it returns only with the sentence that says
// why it could not, and whether that is because there is no such file.
func execSibling(args []string, name string) (why string, missing bool) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "its own executable's path cannot be read, so " + name + " beside it cannot be found", false
	}
	dir := filepath.Dir(self)
	path := filepath.Join(dir, name)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return "its own executable cannot be examined, so " + path + " cannot be checked", false
	}
	f, why, refused := sibling.Open(dir, name, int(st.Uid), os.Geteuid() == 0, "sandboxd starts it as whoever runs sandboxd")
	if f == nil {
		if !refused {
			return fmt.Sprintf("sandboxd's %s %s is missing (%s); install %s beside sandboxd (make build builds them)", what(name), path, why, name), true
		}
		return fmt.Sprintf("sandboxd's %s %s is refused: %s", what(name), path, why), false
	}
	defer f.Close()
	s := stamp
	if s == "" {
		s = unstamped
	}
	env := append(withoutStamp(os.Environ()), stampEnv+"="+s)
	// The file checked is the one executed: through its descriptor, not
	// its path again (close-on-exec is no matter for a binary: the
	// kernel has it open before it closes the descriptor).
	err = unix.Exec("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), args, env)
	return fmt.Sprintf("sandboxd's %s %s could not be started (%s)", what(name), path, kernelReason(err)), false
}

// what is what the sentences call the program name.
func what(name string) string {
	if name == coreName {
		return "core"
	}
	return "embedded run"
}

// withoutStamp is environ without a stamp variable of the caller's
// (only the front's own goes to the core).
func withoutStamp(environ []string) []string {
	out := environ[:0:0]
	for _, kv := range environ {
		if !strings.HasPrefix(kv, stampEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// kernelReason is an errno's text, or "unknown" for another error.
func kernelReason(err error) string {
	if errno, ok := err.(unix.Errno); ok {
		return errno.Error()
	}
	return "unknown"
}
