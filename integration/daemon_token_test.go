package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A client reads its token file itself, and asks the daemon for it only
// when there is none. A file an earlier daemon wrote (read just before
// a restart: the next daemon removes the files at its start) is refused
// by the new daemon's guard before anything of the request is read: the
// client asks for the token, and the run runs, once, its stdin intact,
// through the core and through the front.
func TestDaemonStaleTokenFile(t *testing.T) {
	t.Parallel()
	front := frontLayout(t, stamp)
	forEach(t, func(t *testing.T, e *env) {
		// Each daemon stops here (SIGTERM); one a failed test left is
		// killed by spawnDaemonAt's cleanup.
		d := spawnDaemon(t)
		socket := d.socket
		vars := []string{"SANDBOXD_SOCKET=" + socket}
		old := daemonToken(t, e, socket)
		tokenFile := filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid))
		for i, bin := range []string{binary, front} {
			d.stop(t)
			d = spawnDaemonAt(t, socket, nil)
			if _, err := os.Lstat(tokenFile); err == nil {
				t.Fatal("the restarted daemon left the earlier daemon's token file")
			}
			// What a client that read the file before the restart holds.
			e.writeFile(tokenFile, old+"\n", 0o400)
			ran := filepath.Join(e.ws, fmt.Sprint("ran-", i))
			r := e.sandboxdOpts(runOpts{env: vars, bin: bin, stdin: "line one\nline two\n"}, "run", "--daemon", "--", "sh", "-c", "cat; echo ran >> "+ran)
			r.mustSucceed(t)
			if r.stdout != "line one\nline two\n" {
				t.Errorf("%s: stdin did not reach the command whole: %q\n%s", bin, r.stdout, r)
			}
			if b, _ := os.ReadFile(ran); string(b) != "ran\n" {
				t.Errorf("%s: the command ran %d times, not once", bin, strings.Count(string(b), "ran"))
			}
			if now, _ := os.ReadFile(tokenFile); len(now) < 32 || strings.TrimSpace(string(now)) == old {
				t.Errorf("%s: the token file was not written anew: %q", bin, now)
			}
		}
		d.stop(t)
	})
}

// A token file that is not private to its user is refused, read by the
// client itself as when the daemon named it: nothing runs, through the
// core or the front.
func TestDaemonTokenFileNotPrivate(t *testing.T) {
	t.Parallel()
	socket := startDaemon(t)
	front := frontLayout(t, stamp)
	forEach(t, func(t *testing.T, e *env) {
		vars := []string{"SANDBOXD_SOCKET=" + socket}
		daemonToken(t, e, socket)
		tokenFile := filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid))
		for _, mode := range []os.FileMode{0o440, 0o404} {
			if err := os.Chmod(tokenFile, mode); err != nil {
				t.Fatal(err)
			}
			for _, bin := range []string{binary, front} {
				ran := filepath.Join(e.ws, "ran")
				r := e.sandboxdOpts(runOpts{env: vars, bin: bin}, "run", "--daemon", "--", "sh", "-c", "echo ran > "+ran)
				if r.code != 125 || !strings.Contains(r.stderr, "your daemon token file is not a private file of yours") {
					t.Errorf("%s, token file %o: not refused\n%s", bin, mode, r)
				}
				if _, err := os.Lstat(ran); err == nil {
					t.Errorf("%s, token file %o: the command ran", bin, mode)
				}
			}
		}
		os.Chmod(tokenFile, 0o400)
	})
}
