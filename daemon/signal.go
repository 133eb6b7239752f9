package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"

	"github.com/sandboxd/sandboxd/daemon/client"
)

// liveExec is a running exec a client may signal.
type liveExec struct {
	uid  int
	sigs chan os.Signal
}

// register names a new exec of uid and returns its id and the channel
// its run reads signals from; the returned func forgets it.
func (d *Daemon) register(uid int) (string, chan os.Signal, func()) {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	x := &liveExec{uid: uid, sigs: make(chan os.Signal, 8)}
	d.mu.Lock()
	d.live[id] = x
	d.mu.Unlock()
	return id, x.sigs, func() {
		d.mu.Lock()
		delete(d.live, id)
		d.mu.Unlock()
	}
}

// SignalRequest names a signal to forward (client.SignalRequest).
type SignalRequest = client.SignalRequest

// signal answers POST /v1/execs/{id}/signal: the signal goes to the
// run's command as a person's would (the second INT ends the whole
// tree). Only the exec's own caller may signal it; another's is 404,
// as one that is not there.
func (d *Daemon) signal(w http.ResponseWriter, r *http.Request, c caller) {
	var req SignalRequest
	line, _ := readLine(newBodyReader(r.Body))
	if err := strictJSON(line, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	sig, ok := client.Forwardable()[req.Signal]
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_request", "signal must be one of INT, TERM, HUP, QUIT, USR1, USR2, WINCH")
		return
	}
	d.mu.Lock()
	x := d.live[r.PathValue("id")]
	d.mu.Unlock()
	if x == nil || x.uid != c.UID {
		writeError(w, http.StatusNotFound, "no_such_exec", "no command of yours runs under that id")
		return
	}
	select {
	case x.sigs <- sig:
		writeJSON(w, http.StatusOK, map[string]any{"sent": req.Signal})
	default:
		writeError(w, http.StatusTooManyRequests, "too_many", "signals are coming faster than the command takes them")
	}
}
