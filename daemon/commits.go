package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

// Commits is the daemon's record of the commits it has in flight, one
// file per commit (a session.InFlight: whose, and where its journal is)
// in a directory only root may read, written before the commit starts
// and removed once it has ended well. A daemon killed mid-commit leaves
// the record; the next one, at its start, finishes or rolls back each
// such commit as its caller (Recover) before it serves anyone. It is a
// session.Commits.
//
// The records must outlive the daemon, not the machine: after a reboot
// each caller's next run recovers its own commits, as it always does.
type Commits struct {
	dir string
	// mu guards told: the recoveries Recover did for each uid, until
	// that uid's next exec takes them (Told).
	mu   sync.Mutex
	told map[int][]session.Event
}

// NewCommits makes dir (root's, 0700) for the records.
func NewCommits(dir string) (*Commits, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: commits: %w", err)
	}
	if err := ownedByRoot(dir, 0o700); err != nil {
		return nil, err
	}
	return &Commits{dir: dir, told: map[int][]session.Event{}}, nil
}

// recordExt ends a record's name; anything else in the directory is a
// record a daemon was writing when it died, and nothing to act on.
const recordExt = ".json"

// Begin records c until end (session.Commits). The record is written
// whole or not at all (a temporary file renamed): a daemon killed while
// writing it leaves no half record, and its commit had not started.
func (c *Commits) Begin(f session.InFlight) (func(), error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("daemon: commits: %w", err)
	}
	var r [12]byte
	rand.Read(r[:])
	p := filepath.Join(c.dir, hex.EncodeToString(r[:])+recordExt)
	tmp := p + ".new"
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon: commits: %w", err)
	}
	_, werr := unix.Write(fd, b)
	unix.Close(fd)
	if werr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("daemon: commits: %w", werr)
	}
	return func() { os.Remove(p) }, nil
}

// Recover finishes or rolls back, each as its own caller (never as
// root: session.Recover acts with the caller's file-system identity),
// the commits an earlier daemon recorded in flight, logs each, and
// removes the records it has dealt with. A record whose recovery failed
// stays for the next start (the caller's next run tries too). It
// returns how many commits it finished or rolled back.
func (c *Commits) Recover(log *slog.Logger) int {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		log.Error("commits in flight: cannot read the records", "dir", c.dir, "err", err)
		return 0
	}
	n := 0
	for _, e := range ents {
		p := filepath.Join(c.dir, e.Name())
		if !strings.HasSuffix(e.Name(), recordExt) || !e.Type().IsRegular() {
			os.Remove(p)
			continue
		}
		f, err := readRecord(p)
		if err != nil {
			log.Error("commits in flight: a record that names no commit is dropped", "record", p, "err", err)
			os.Remove(p)
			continue
		}
		rec, err := session.Recover(f, log)
		for _, r := range rec {
			if r.Err != "" {
				continue // err says why
			}
			n++
			c.tell(f.UID, r)
			log.Info("recovered a commit the daemon was killed in", "uid", f.UID, "workspace", r.Workspace,
				"run", r.RunID, "action", r.Action, "ops", r.Ops, "conflicts", len(r.Conflicts))
		}
		if err != nil {
			log.Error("commits in flight: recovery failed; the record stays for the next start", "uid", f.UID,
				"workspace", f.Workspace, "err", err)
			continue
		}
		if len(rec) == 0 {
			log.Debug("commits in flight: nothing left to recover", "uid", f.UID, "workspace", f.Workspace, "run", f.RunID)
		}
		os.Remove(p)
	}
	return n
}

// tell keeps r for uid's next exec.
func (c *Commits) tell(uid int, r layer.Recovered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.told[uid] = append(c.told[uid], session.Event{Kind: session.KindRecovered, Recovered: &r})
}

// Told returns, once, what Recover did for uid's commits, as the events
// a run that had recovered them itself would have sent (nil Commits:
// none).
func (c *Commits) Told(uid int) []session.Event {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := c.told[uid]
	delete(c.told, uid)
	return ev
}

// tellRecovered tells the caller's exec what the daemon recovered of
// its commits when it started, as a run that recovers one itself tells
// it (session.Runner.Run): the events now, on ev, and the report's
// transaction through the function it returns, once the run is over.
func (d *Daemon) tellRecovered(uid int, ev session.Events) func(*session.Report) {
	told := d.cfg.Commits.Told(uid)
	for _, e := range told {
		ev.Event(e)
	}
	return func(rep *session.Report) {
		for _, e := range told {
			if rep != nil && rep.Transaction != nil {
				rep.Transaction.Recovered = append(rep.Transaction.Recovered, *e.Recovered)
			}
		}
	}
}

// readRecord reads one record: a file of root's that only root may
// write (a record makes the daemon act as the uid it names), holding a
// JSON object of session.InFlight's fields, no more.
func readRecord(p string) (session.InFlight, error) {
	var f session.InFlight
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return f, err
	}
	file := os.NewFile(uintptr(fd), p)
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return f, err
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return f, errors.New("not a record of the daemon's: not a file only root may write")
	}
	b, err := io.ReadAll(io.LimitReader(file, 1<<20))
	if err != nil {
		return f, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || dec.More() {
		return f, errors.New("not a record of a commit")
	}
	if !filepath.IsAbs(f.StateDir) || f.UID < 0 || f.GID < 0 {
		return f, errors.New("not a record of a commit")
	}
	return f, nil
}
