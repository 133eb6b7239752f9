package client

import (
	"io"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"
)

// Phases is a run client's mark for -v: each logs a phase of the run
// through the daemon as the sandbox's phases are logged ("client", the
// phase, microseconds since the first mark, the wall clock and this
// process's CPU), which bench/launch -phases reads beside the daemon's;
// without verbose it logs nothing.
func Phases(verbose bool, stderr io.Writer) func(what string) {
	if !verbose {
		return func(string) {}
	}
	t0 := time.Now()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return func(what string) {
		now := time.Now()
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		log.Debug("client", "phase", what, "at_us", now.Sub(t0).Microseconds(), "unix_us", now.UnixMicro(),
			"cpu_us", ru.Utime.Nano()/1000+ru.Stime.Nano()/1000)
	}
}
