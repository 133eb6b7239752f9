// Command sandboxd-run is `sandboxd run` done here, embedded, without the
// rest of sandboxd: the front (cmd/sandboxd-front, installed as
// sandboxd) executes it in its place for every run it does not send to
// the daemon itself (make build installs it beside the front as
// sandboxd-run). It is the run's supervisor: the session, its proxy and
// resolver, its audit log and the person at the terminal, the same code
// as the core's run (package runcmd).
//
// Why: every package a program links initialises again at each start,
// and the supervisor starts at every embedded launch. The core links the
// model client (openai-go), Prometheus and its protobuf, the MCP SDK,
// html/template and the daemon's server, 4 ms of initialisation an
// embedded run uses none of, but for one: the model reviewer. That one
// is asked of the core, started for each prompt (runcmd.CoreModels):
// reviews are rare and take a model's seconds, launches are every
// command's. The core is checked as the front checks it (package
// sibling, and the build stamp, which the core refuses on mismatch);
// any failure of it is the model reviewer's, which the broker takes as
// a deny.
//
// A run is taken here only with the separate helper (sandboxd-helper,
// checked as the core is): without one the helper would be this
// binary, and a run with the nftables library linked here would be the
// core again. So when the helper cannot be used, or for any command
// line but run's, this program executes the core in its place, which
// decides and says it as it always has.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"

	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

func main() { os.Exit(start(os.Args)) }

// start is the process: a run here, or the core in its place.
func start(args []string) int {
	// Executed through a descriptor, the process is named after it.
	sibling.Named(args[0])
	// The front's stamp is read and removed before anything could pass
	// it on.
	if why := runcmd.FromFront("embedded run " + runcmd.RunName); why != "" {
		fmt.Fprintf(os.Stderr, "sandboxd: %s\n", why)
		return runcmd.ExitSandboxd
	}
	helper := runcmd.FindHelper()
	if len(args) < 2 || args[1] != "run" || helper.File == nil {
		fmt.Fprintf(os.Stderr, "sandboxd: %s\n", runcmd.ExecCore(args))
		return runcmd.ExitSandboxd
	}
	// As the core's (cmd/sandboxd start): a run allocates a few
	// megabytes and keeps little of them; GOGC, when set, stands.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	// Only 0-2 of what sandboxd inherited reach a helper or a command.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// The signals a person sends sandboxd go to the command's tree.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Stop(sigs)
	return runcmd.Command(context.Background(), args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, sigs, runcmd.Options{
		Models: runcmd.CoreModels, Helper: &helper,
		// Inside the sandbox /proc/self/exe is the helper's executable,
		// which is the reader too.
		EvidenceReader: runcmd.EvidenceReader(),
	})
}
