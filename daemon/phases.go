package daemon

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"
)

// mark logs, with -v, that an exec reached phase what: when, in
// microseconds since t0 (the handler's start) and since the Unix epoch,
// and the daemon's CPU time by then, user and system, its helpers' not
// included. The line is the one sandbox.LogPhase writes for the run's
// own phases (this package does not import sandbox); bench/launch
// -phases reads them.
func (d *Daemon) mark(t0 time.Time, what string) {
	if !d.cfg.Log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	now := time.Now()
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	d.cfg.Log.Debug("daemon", "phase", what, "at_us", now.Sub(t0).Microseconds(), "unix_us", now.UnixMicro(),
		"cpu_us", ru.Utime.Nano()/1000+ru.Stime.Nano()/1000)
}
