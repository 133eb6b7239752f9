// Command sandboxd-helper is sandboxd's sandbox helper alone: the process
// a run starts in its namespaces (package confine), without the rest of
// sandboxd (the model client, the daemon, metrics, TLS), whose start-up
// and package initialisation every launch would pay for again. sandboxd
// runs it when it lies beside sandboxd's own executable, is owned as
// sandboxd's is and is of the same build (the build stamp, checked on
// every run); otherwise sandboxd re-executes itself as the helper.
//
// It is started only by sandboxd, never by a person: as the helper, as
// doctor's namespace probe, or inside a sandbox as the model reviewer's
// evidence reader (which a run starts as /proc/self/exe, and inside a
// run that is this binary); any other command line is a usage error.
package main

import (
	"fmt"
	"os"

	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/sandbox/confine"
)

func main() {
	// Neither returns.
	if confine.IsHelper(os.Args) {
		confine.Main()
	}
	if confine.IsProbe(os.Args) {
		confine.ProbeMain()
	}
	if evidence.IsReader(os.Args) {
		// The reviewer's reader, run as a command inside a sandbox: the
		// run executes /proc/self/exe, which inside is this binary.
		os.Exit(evidence.Reader(os.Stdin, os.Stdout))
	}
	fmt.Fprintln(os.Stderr, "sandboxd-helper: sandboxd starts this program for its runs; it takes no command line of its own (run sandboxd instead)")
	os.Exit(2)
}
