package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// wait follows the helper until the command has ended, forwarding
// signals and enforcing the timeout, and returns the command's status.
// The command has ended when the helper has exited, or sooner when it
// has said how the command ended and closed its end of the socket while
// the run's group holds no process but the helper's (the kernel's word,
// not the helper's: see helper.alone); cleanup then waits for the
// helper itself. wait returns only once the message reader has ended
// and the relays have delivered everything, and it stops every timer it
// started.
func (h *helper) wait(ctx context.Context, spec Spec, log *slog.Logger) (code, sig int, timedOut bool, err error) {
	w := &watch{h: h, spec: spec, log: log, msgs: h.readMessages(log)}
	defer w.stopTimers()
	sigs := spec.Signals // nil: none are forwarded
	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		w.timeout = time.NewTimer(spec.Timeout)
		timeout = w.timeout.C
	}
	done := ctx.Done()
	for {
		select {
		case m, ok := <-w.msgs:
			if !ok {
				w.msgs = nil
				if w.haveExit && h.alone() {
					// Only the helper is left, and it is exiting.
					log.Debug("the command has ended; the helper is exiting")
					h.endStdin()
					return w.result()
				}
				continue
			}
			w.note(m)
		case s := <-sigs:
			w.forward(s)
		case <-timeout:
			w.timedOut = true
			timeout = nil
			log.Debug("timeout; terminating")
			w.terminate()
		case <-done:
			done = nil
			w.terminate()
		case <-w.graceC:
			w.graceOver()
		case <-h.exited:
			return w.result()
		}
	}
}

// watch is the state of one wait.
type watch struct {
	h    *helper
	spec Spec
	log  *slog.Logger
	msgs chan wire.Message // nil once the reader has ended
	// last is the helper's last Exit or Error message, if haveExit.
	last     wire.Message
	haveExit bool
	timedOut bool
	// timeout ends the command. grace, restarted each time the command
	// is asked to end, has the helper kill it (graceC is nil when it is
	// not running); kill, started then, kills the helper itself.
	timeout, grace, kill *time.Timer
	graceC               <-chan time.Time
	// early are signals that came before the helper could take them: its
	// handlers are in place once it reports the command started, and
	// before that a signal's default action would end the helper itself.
	early []os.Signal
	// interrupted: a SIGINT was forwarded; another one, or a SIGTERM,
	// kills the whole tree at once (a person pressing Ctrl-C twice).
	interrupted bool
	forced      bool
}

// forward sends a signal to the helper, which relays it to the command;
// it holds the signal until the command has started. A SIGINT or SIGTERM
// after a SIGINT kills every process of the command instead.
func (w *watch) forward(s os.Signal) {
	if w.interrupted && (s == unix.SIGINT || s == unix.SIGTERM) {
		if !w.forced {
			w.forced = true
			w.log.Debug("interrupted twice; killing the command's processes")
			if w.grace != nil {
				w.grace.Stop()
			}
			w.graceOver()
		}
		return
	}
	if s == unix.SIGINT {
		w.interrupted = true
	}
	if w.h.started.IsZero() {
		if len(w.early) < 8 {
			w.early = append(w.early, s)
		}
		return
	}
	w.h.cmd.Process.Signal(s)
}

func (w *watch) note(m wire.Message) {
	switch m.Kind {
	case wire.Started:
		w.h.started = time.Now()
		w.logPhases(m)
		for _, s := range w.early {
			w.h.cmd.Process.Signal(s)
		}
		w.early = nil
	case wire.Exit, wire.Error:
		w.logPhases(m)
		w.last, w.haveExit = m, true
		w.h.haveExit = true
		if m.Kind == wire.Exit {
			w.h.exitLimits = m.Limits
		}
	case wire.Caches:
		for _, o := range m.Caches {
			if o.Cause != "" {
				w.log.Warn("private cache", "why", o.Why, "err", o.Cause)
			}
		}
		w.h.caches.note(m)
	}
}

// logPhases logs the helper's phases a message carries (its setup's with
// Started, its end's with Exit), for -v.
func (w *watch) logPhases(m wire.Message) {
	if m.Info == nil {
		return
	}
	for _, p := range m.Info.Phases {
		w.log.Debug("helper", "phase", p.Name, "at_us", p.US, "unix_us", p.Unix, "cpu_us", p.CPU)
	}
}

// terminate asks the helper to SIGTERM everything and (re)starts the
// grace period.
func (w *watch) terminate() {
	wire.Send(w.h.sock, wire.Message{Kind: wire.Terminate})
	if w.grace != nil {
		w.grace.Stop()
	}
	w.grace = time.NewTimer(w.spec.KillGrace)
	w.graceC = w.grace.C
}

// graceOver has the helper SIGKILL everything, and kills the helper
// itself shortly after: in a pid namespace that kills everything.
func (w *watch) graceOver() {
	w.graceC = nil
	wire.Send(w.h.sock, wire.Message{Kind: wire.Kill})
	if w.kill == nil {
		w.kill = time.AfterFunc(200*time.Millisecond, w.h.kill)
	}
}

// stopTimers stops every timer the wait started: none may fire after it.
func (w *watch) stopTimers() {
	for _, t := range []*time.Timer{w.timeout, w.grace, w.kill} {
		if t != nil {
			t.Stop()
		}
	}
}

// result drains what the helper said before it went (the reader ends at
// EOF now that the helper's end is closed), waits for the relays, and
// turns the helper's last word into the command's status.
func (w *watch) result() (code, sig int, timedOut bool, err error) {
	for m := range drain(w.msgs) {
		if m.Kind == wire.Exit || m.Kind == wire.Error {
			w.note(m)
		}
	}
	w.h.relays.Wait()
	last := w.last
	switch {
	case w.timedOut:
		return 124, 0, true, nil
	case w.haveExit && last.Kind == wire.Exit:
		return last.Code, last.Sig, false, nil
	case w.haveExit && last.Kind == wire.Error && (last.Code == 126 || last.Code == 127):
		// "bash: NAME: command not found": NAME is the command's.
		if w.spec.Stderr != nil {
			fmt.Fprintln(w.spec.Stderr, termfilter.Escape(last.Error))
		}
		w.h.neverRan = true
		return last.Code, 0, false, nil
	case w.haveExit && last.Kind == wire.Error && last.Why != "":
		// A failure the helper has a public sentence for (wire.Skew).
		w.log.Debug("helper failed", "err", last.Error)
		return 0, 0, false, publicerr.Wrap(errors.New(last.Error), last.Why)
	case w.haveExit && last.Kind == wire.Error:
		// The helper's own failure names sandboxd's internals: logged,
		// not shown.
		w.log.Debug("helper failed", "err", last.Error)
		return 0, 0, false, publicerr.Wrap(errors.New(last.Error), "the sandbox could not be set up for the command (run with -v to log why)")
	}
	return 0, 0, false, fmt.Errorf("sandbox: helper ended without a status: %v", w.h.waitErr)
}

// readMessages reads the helper's messages until its end of the socket
// closes, then closes the channel. Descriptors are taken as they arrive
// (take), before the message is passed on.
func (h *helper) readMessages(log *slog.Logger) chan wire.Message {
	msgs := make(chan wire.Message, 4)
	go func() {
		defer close(msgs)
		rcv := wire.NewReceiver(h.sock)
		for {
			m, fds, err := rcv.Recv()
			if err != nil {
				closeAll(fds)
				return
			}
			closeAll(h.take(m, fds, log))
			msgs <- m
		}
	}()
	return msgs
}

// take hands the descriptors attached to m to their owner, by m's kind,
// and returns those nobody took, to be closed: the seccomp listener
// starts the observer at once (the helper and the command stop in every
// observed call until it answers), the layer is kept for the caller, the
// proxy's listener is served at once and the helper's sockets go to the
// request waiting for them.
func (h *helper) take(m wire.Message, fds []int, log *slog.Logger) []int {
	switch m.Kind {
	case wire.Diag:
		return h.takeDiag(fds)
	case wire.Listener:
		return h.takeListener(fds, log)
	case wire.Layer:
		return h.takeLayer(fds)
	case wire.Egress:
		return h.takeEgress(fds)
	case wire.Socket:
		if h.egress != nil {
			return h.egress.answer(m, fds)
		}
	case wire.Capture:
		if h.egress != nil {
			h.egress.capture(m, fds)
			return nil
		}
	}
	return fds
}

// takeDiag keeps the network namespace's sock_diag socket, for the
// observer and the proxy.
func (h *helper) takeDiag(fds []int) []int {
	if len(fds) != 1 || h.diag != nil {
		return fds
	}
	h.diag = detect.NewDiag(fds[0])
	if h.egress != nil {
		h.egress.diag.Store(h.diag)
	}
	return nil
}

// takeListener starts the observer on the seccomp notification
// descriptor. The helper sends the namespace's sock_diag socket first
// (without it, no pathname unix socket is reached).
func (h *helper) takeListener(fds []int, log *slog.Logger) []int {
	if len(fds) != 1 || h.obs != nil {
		return fds
	}
	h.obs = detect.StartObserver(fds[0], h.cmd.Process.Pid, h.shared, h.diag, h.connects, h.onWatch, log)
	return nil
}

// takeLayer keeps the copy-on-write layer's file system for the caller.
func (h *helper) takeLayer(fds []int) []int {
	if len(fds) != 1 || h.layer != nil {
		return fds
	}
	h.layer = os.NewFile(uintptr(fds[0]), "layer")
	return nil
}

// takeEgress serves the proxy's listening socket and, when the run has
// a SOCKS5 endpoint and the helper sent its socket too, that one.
func (h *helper) takeEgress(fds []int) []int {
	if h.egress == nil || len(fds) == 0 {
		return fds
	}
	h.egress.listen(fds[0], h.egress.spec.Serve, "proxy")
	fds = fds[1:]
	if len(fds) == 1 && h.egress.spec.SOCKS != nil {
		h.egress.listen(fds[0], h.egress.spec.SOCKS, "socks")
		fds = fds[1:]
	}
	return fds
}

// drain returns c, or a closed channel when c is nil.
func drain(c chan wire.Message) <-chan wire.Message {
	if c == nil {
		c = make(chan wire.Message)
		close(c)
	}
	return c
}
