package layer

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/atomicfile"
	"golang.org/x/sys/unix"
)

// A commit's files in StateDir/txn, all named by the run id:
//
//	ID.lock     held (flock) by the committing process for its lifetime
//	ID.journal  the record: workspace, staging directory, state, ops
//	ID.done     one line per applied op
//	ID.stage/   staged files, when the state directory shares the
//	            workspace's mount (otherwise WORKSPACE/.sandboxd-commit-ID)
//
// State "staging": files are being copied; nothing in the workspace has
// changed, so recovery removes the staging directory. State "staged":
// every file is staged and the ops are fixed; recovery applies the ops
// not yet marked done. The journal is removed last.

const journalVersion = 1

type record struct {
	Version   int    `json:"version"`
	RunID     string `json:"run_id"`
	Workspace string `json:"workspace"`
	State     string `json:"state"` // staging, staged
	Stage     string `json:"stage"`
	StageInWS bool   `json:"stage_in_workspace,omitempty"`
	Ops       []op   `json:"ops,omitempty"`
}

type journal struct {
	dir  string
	id   string
	lock *os.File
	rec  record
	done *os.File
}

func (j *journal) path(ext string) string { return filepath.Join(j.dir, j.id+ext) }

func newJournal(stateDir, runID, ws string) (*journal, error) {
	if runID == "" || strings.ContainsAny(runID, "/.") {
		return nil, fmt.Errorf("layer: bad run id %q", runID)
	}
	j := &journal{dir: Where(stateDir), id: runID, rec: record{Version: journalVersion, RunID: runID, Workspace: ws}}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer: journal: %w", err)
	}
	lock, err := lockFile(j.path(".lock"), false)
	if err != nil {
		return nil, fmt.Errorf("layer: journal: %w", err)
	}
	j.lock = lock
	return j, nil
}

// lockFile opens and flocks path; with try, a lock held elsewhere is
// errLocked.
func lockFile(path string, try bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if try {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return f, nil
}

var errLocked = errors.New("locked by a running commit")

func (j *journal) write() error {
	b, err := json.Marshal(j.rec)
	if err != nil {
		return err
	}
	// Atomic against a crash of sandboxd, not synced: see atomicfile's
	// doc for why a synced journal alone would not survive a power loss.
	if err := atomicfile.WriteFile(j.path(".journal"), b, 0o600); err != nil {
		return fmt.Errorf("layer: journal: %w", err)
	}
	return nil
}

// markStaged fixes the ops; from now on the commit will be completed.
func (j *journal) markStaged(ops []op) error {
	j.rec.State, j.rec.Ops = "staged", ops
	f, err := os.OpenFile(j.path(".done"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("layer: journal: %w", err)
	}
	j.done = f
	return j.write()
}

// done records op i as applied.
func (j *journal) markDone(i int) {
	if j.done != nil {
		j.done.WriteString(strconv.Itoa(i) + "\n")
	}
}

// finish ends a commit: the journal goes first, so a crash after it
// leaves only files recovery removes.
func (j *journal) finish() {
	os.Remove(j.path(".journal"))
	os.Remove(j.path(".done"))
	// A write the crash interrupted; the lock keeps any other out.
	atomicfile.RemoveLeftovers(j.path(".journal"))
	os.Remove(j.path(".journal.tmp")) // the name before atomicfile
}

// discard ends a commit that changed nothing.
func (j *journal) discard() { j.finish() }

func (j *journal) close() {
	if j.done != nil {
		j.done.Close()
	}
	if j.lock != nil {
		os.Remove(j.path(".lock"))
		j.lock.Close()
	}
}

// stager copies files to commit onto the workspace's file system.
type stager struct {
	dir   string // absolute path
	fd    int
	inWS  bool
	ws    int
	n     int
	chown bool
	buf   []byte // reused for every copy
}

func newStager(j *journal, ws int, opt Options) (*stager, error) {
	s := &stager{ws: ws, fd: -1, chown: os.Geteuid() == 0}
	wst, err := lstatAt(ws, ".")
	if err != nil {
		return nil, fmt.Errorf("layer: workspace: %w", err)
	}
	var sst unix.Statx_t
	err = unix.Statx(unix.AT_FDCWD, j.dir, 0, unix.STATX_MNT_ID, &sst)
	if err == nil && sst.Mnt_id == wst.Mnt_id && sst.Mask&unix.STATX_MNT_ID != 0 {
		s.dir = j.path(".stage")
	} else {
		// Renames need the same mount: stage inside the workspace.
		s.dir, s.inWS = filepath.Join(j.rec.Workspace, ".sandboxd-commit-"+j.id), true
	}
	j.rec.State, j.rec.Stage, j.rec.StageInWS = "staging", s.dir, s.inWS
	if err := j.write(); err != nil {
		return nil, err
	}
	if s.inWS {
		err = unix.Mkdirat(ws, filepath.Base(s.dir), 0o700)
	} else {
		err = unix.Mkdir(s.dir, 0o700)
	}
	if err != nil {
		return nil, fmt.Errorf("layer: staging directory: %w", err)
	}
	if s.inWS {
		s.fd, err = openBeneath(ws, filepath.Base(s.dir), unix.O_PATH|unix.O_DIRECTORY)
	} else {
		s.fd, err = unix.Open(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("layer: staging directory: %w", err)
	}
	return s, nil
}

// file stages src with the given metadata and returns its staged name.
func (s *stager) file(src *os.File, mode uint32, uid, gid int, atime, mtime unix.StatxTimestamp) (string, int64, error) {
	s.n++
	name := strconv.Itoa(s.n)
	if s.buf == nil {
		s.buf = make([]byte, copyBuffer)
	}
	n, dst, err := copyInto(s.fd, name, src, 0o600, s.buf)
	if err != nil {
		return "", n, err
	}
	defer dst.Close()
	fd := int(dst.Fd())
	if s.chown && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return "", n, err
		}
	}
	if mode != 0o600 {
		if err := unix.Fchmod(fd, mode); err != nil {
			return "", n, err
		}
	}
	ts := []unix.Timespec{{Sec: atime.Sec, Nsec: int64(atime.Nsec)}, {Sec: mtime.Sec, Nsec: int64(mtime.Nsec)}}
	if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		return "", n, err
	}
	return name, n, dst.Close()
}

// discard removes the staging directory and what is left in it.
func (s *stager) discard() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	removeStage(s.dir, s.inWS, s.ws)
}

func removeStage(dir string, inWS bool, ws int) {
	if dir == "" {
		return
	}
	if inWS {
		if ws >= 0 {
			removeBeneath(ws, filepath.Base(dir))
		}
		return
	}
	os.RemoveAll(dir)
}

// Recovered is one interrupted commit that recovery dealt with.
type Recovered struct {
	RunID     string `json:"run_id"`
	Workspace string `json:"workspace"`
	// Action is "rolled back" (nothing had reached the workspace) or
	// "completed" (the remaining ops were applied).
	Action string `json:"action"`
	Ops    int    `json:"ops,omitempty"`
	// Conflicts are ops skipped because the workspace changed since the
	// commit was planned (between the crash and the recovery, say).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Err       string     `json:"error,omitempty"`
}

// Recover finishes or rolls back every interrupted commit recorded in
// stateDir, skipping those whose process still runs. Commits of any
// workspace are recovered.
func Recover(stateDir string, log *slog.Logger) ([]Recovered, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := Where(stateDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("layer: recover: %w", err)
	}
	var out []Recovered
	var errs []error
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".journal")
		if !ok {
			if id, ok := strings.CutSuffix(e.Name(), ".stage"); ok {
				if _, err := os.Lstat(filepath.Join(dir, id+".journal")); errors.Is(err, os.ErrNotExist) {
					removeOrphan(dir, id)
				}
			}
			continue
		}
		j := &journal{dir: dir, id: id}
		lock, err := lockFile(j.path(".lock"), true)
		if errors.Is(err, errLocked) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		j.lock = lock
		r, err := recoverOne(j, log)
		if err != nil {
			r.Err = err.Error()
			errs = append(errs, err)
		}
		j.close()
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func removeOrphan(dir, id string) {
	j := &journal{dir: dir, id: id}
	lock, err := lockFile(j.path(".lock"), true)
	if err != nil {
		return
	}
	j.lock = lock
	os.RemoveAll(j.path(".stage"))
	j.finish()
	j.close()
}

func recoverOne(j *journal, log *slog.Logger) (Recovered, error) {
	b, err := os.ReadFile(j.path(".journal"))
	if errors.Is(err, os.ErrNotExist) {
		return Recovered{RunID: j.id, Action: "gone"}, nil // finished meanwhile
	}
	if err != nil {
		return Recovered{RunID: j.id}, fmt.Errorf("layer: recover %s: %w", j.id, err)
	}
	if err := json.Unmarshal(b, &j.rec); err != nil || j.rec.Version != journalVersion || j.rec.RunID != j.id {
		return Recovered{RunID: j.id}, fmt.Errorf("layer: recover %s: unreadable journal (left in place): %v", j.id, err)
	}
	r := Recovered{RunID: j.id, Workspace: j.rec.Workspace}
	ws, err := unix.Open(j.rec.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if j.rec.State != "staged" {
			// Nothing reached the workspace; its staging went with it.
			removeStage(j.rec.Stage, j.rec.StageInWS, -1)
			j.finish()
			r.Action = "rolled back"
			return r, nil
		}
		return r, fmt.Errorf("layer: recover %s: workspace: %w", j.id, err)
	}
	defer unix.Close(ws)
	if j.rec.State != "staged" {
		removeStage(j.rec.Stage, j.rec.StageInWS, ws)
		j.finish()
		r.Action = "rolled back"
		log.Info("rolled back an interrupted commit", "run", j.id, "workspace", j.rec.Workspace)
		return r, nil
	}
	last := lastDone(j.path(".done"))
	s := &stager{dir: j.rec.Stage, inWS: j.rec.StageInWS, ws: ws, chown: os.Geteuid() == 0}
	if s.inWS {
		s.fd, err = openBeneath(ws, filepath.Base(s.dir), unix.O_PATH|unix.O_DIRECTORY)
	} else {
		s.fd, err = unix.Open(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return r, fmt.Errorf("layer: recover %s: staging: %w", j.id, err)
	}
	done, derr := os.OpenFile(j.path(".done"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if derr == nil {
		j.done = done
	}
	var out Outcome
	for i := last + 1; i < len(j.rec.Ops); i++ {
		// Each op still checks that the workspace holds what the plan saw
		// (it may have been edited since the crash), except a removal
		// that was under way at the crash: it may be half done, and is
		// finished.
		check := i > last+1 || j.rec.Ops[i].Kind != "remove"
		if err := applyOp(ws, s, &j.rec.Ops[i], check, &out, j.id); err != nil {
			s.discardFD()
			return r, fmt.Errorf("layer: recover %s: %s %s: %w", j.id, j.rec.Ops[i].Kind, j.rec.Ops[i].Path, err)
		}
		j.markDone(i)
		r.Ops++
	}
	s.discard()
	j.finish()
	r.Action, r.Conflicts = "completed", out.Conflicts
	log.Info("completed an interrupted commit", "run", j.id, "workspace", j.rec.Workspace, "ops", r.Ops)
	return r, nil
}

func (s *stager) discardFD() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// lastDone is the highest op index recorded as applied, or -1.
func lastDone(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	last := -1
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	for sc.Scan() {
		if n, err := strconv.Atoi(sc.Text()); err == nil && n > last {
			last = n
		}
	}
	return last
}
