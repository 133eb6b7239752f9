package session

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/sandbox"
)

// evidenceTimeout bounds one inspection's reader: its sandbox's start
// and every read (the review's own deadline may end it sooner).
const evidenceTimeout = 10 * time.Second

// readerSpec is the sandbox that reads the model reviewer's evidence:
// the run's own view (the same mounts and masks, private /tmp, Landlock
// rules and uid, from the same Spec) running the reader instead of the
// command, and acting on nothing: read-only, no detection, no egress,
// no caches (their lock belongs to the run's attempts), no granted
// exceptions (the first attempt's view), no signals, no environment.
func readerSpec(spec sandbox.Spec, argv []string) sandbox.Spec {
	s := spec
	s.Argv = append([]string(nil), argv...)
	s.Env, s.Dir = nil, "/"
	s.Caches, s.CacheLayers = nil, nil
	s.Exceptions, s.Egress, s.OnWatch, s.Signals = nil, nil, nil, nil
	s.Transaction, s.LayerSize = false, 0
	s.NoDetect, s.ReadOnly = true, true
	s.Timeout = evidenceTimeout
	s.Stdin, s.Stdout, s.Stderr, s.Pipes = nil, nil, nil, nil
	return s
}

// viewOpener returns what opens a view of a run's command for the model
// reviewer (ModelConfig.OpenView): a reader in a read-only sandbox of
// spec, one per inspection. It is nil when the front end named no
// reader: then no script is read at all.
func (r *Runner) viewOpener(spec sandbox.Spec) func(ctx context.Context) (*evidence.Client, error) {
	if len(r.reader) == 0 {
		return nil
	}
	base := readerSpec(spec, r.reader)
	return func(ctx context.Context) (*evidence.Client, error) {
		inR, inW, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("session: evidence reader's input: %w", err)
		}
		outR, outW := io.Pipe()
		ctx, cancel := context.WithTimeout(ctx, evidenceTimeout)
		s := base
		s.Stdin, s.Stdout, s.Stderr = inR, outW, io.Discard
		done := make(chan error, 1)
		go func() {
			start := time.Now()
			res, err := r.sandbox.Run(ctx, s, nil, r.log)
			inR.Close()
			res.Layer.Close()
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("session: the evidence reader exited %d", res.ExitCode)
			}
			r.log.Debug("evidence reader", "setup_us", res.Setup.Microseconds(), "took_us", time.Since(start).Microseconds(), "err", err)
			// Its output ends with it: a read still waiting fails.
			outW.CloseWithError(io.EOF)
			done <- err
		}()
		return evidence.NewClient(inW, outR, func() error {
			inW.Close()  // the reader's input ends: it exits
			outR.Close() // and whatever it still writes is dropped
			err := <-done
			cancel()
			return err
		}), nil
	}
}
