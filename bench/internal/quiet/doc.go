// Package quiet waits, between the runs of a benchmark, until the
// machine's processors are idle again, so that work one run left behind
// (a daemon's release and pool refill after its report, the kernel's
// teardown of a network namespace in a worker thread) is not timed as
// part of the next run, whichever contender that is. Of sandboxd's
// packages it imports none.
package quiet
