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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/atomicfile"
	"github.com/sandboxd/sandboxd/fsid"
	"golang.org/x/sys/unix"
)

// A commit's files in StateDir/txn, all named by the run id:
//
//	ID.lock     held (flock) by the committing process for its lifetime
//	ID.journal  the record: workspace, staging directory, state, ops
//	ID.done     one line per applied op (written in batches: markDone)
//	ID.stage/   staged files, and each directory the workspace does not
//	            have with everything in it, under their final names, when
//	            the state directory shares the workspace's mount
//	            (otherwise WORKSPACE/.sandboxd-commit-ID)
//
// State "staging": files are being copied; nothing in the workspace has
// changed, so recovery removes the staging directory. State "staged":
// every file is staged and the ops are fixed; recovery applies the ops
// not yet marked done. The journal is removed last.

// Version 2 added the placedir op; version 1 journals are still read.
const journalVersion = 2

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
	dir     string
	id      string
	lock    *os.File
	rec     record
	done    *os.File
	pending []byte // done records not yet written
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

// markDone records op i as applied. The records are written in batches
// (flushDone): replaying an op that was applied but not yet recorded
// ends in the same state, for every kind of op but a removal that has
// not been checked (the first op after the last recorded one, see
// recoverOne), and applier.apply writes a removal's record, and all
// before it, before it goes on.
func (j *journal) markDone(i int) {
	if j.done == nil {
		return
	}
	j.pending = strconv.AppendInt(j.pending, int64(i), 10)
	j.pending = append(j.pending, '\n')
	if len(j.pending) >= doneBatch {
		j.flushDone()
	}
}

// doneBatch is how many bytes of done records are written at once.
const doneBatch = 8 << 10

// flushDone writes the done records not yet written.
func (j *journal) flushDone() {
	if j.done != nil && len(j.pending) > 0 {
		j.done.Write(j.pending)
	}
	j.pending = j.pending[:0]
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

// stager copies files to commit onto the workspace's file system. The
// copies are made by a few workers at once (stageWorkers): creating
// files is the kernel's work, and it is the commit's largest.
type stager struct {
	dir   string // absolute path
	fd    int
	inWS  bool
	ws    int
	n     int
	chown bool
	// replay: recovery, where an op may have been applied before the
	// crash.
	replay bool
	// caller is whose files the stager makes: its workers take on its
	// identity, whose umask the kernel applies to what they create.
	caller     fsid.ID
	euid, egid int
	umask      uint32 // the caller's; noUmask when unknown

	jobs    chan stageJob
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error // the first copy that failed
	failed  atomic.Bool
	bytes   atomic.Int64
	staged  atomic.Int64
	onStage func(n int64) // after the nth file is staged (a failpoint)
}

// stageJob is one file to stage.
type stageJob struct {
	dir          *stageDir // where (nil: the top of the staging directory)
	src          int       // the layer's file, open for reading; the worker closes it
	name, path   string    // the staged name, the workspace path (for errors)
	mode         uint32
	uid, gid     int
	size         int64
	atime, mtime unix.StatxTimestamp
}

// done releases what job holds.
func (job *stageJob) done() {
	unix.Close(job.src)
	if job.dir != nil {
		job.dir.release()
	}
}

// noUmask stands for an unknown umask: every staged file gets its mode
// by fchmod.
const noUmask = ^uint32(0)

func newStager(j *journal, ws int, opt Options) (*stager, error) {
	c := opt.Caller
	s := &stager{ws: ws, fd: -1, chown: c.UID == 0, caller: c, euid: c.UID, egid: c.GID, umask: c.Umask & 0o777}
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

// stageWorkers is how many files are staged at once: creating a file is
// the kernel's work, on the CPU, and the walk that plans the commit takes
// one more; two at least, at most four (they share the directories'
// locks).
func stageWorkers() int { return min(max(runtime.GOMAXPROCS(0), 2), 4) }

// file queues src (the layer's file at workspace path p, whose statx is
// st; the stager closes it) to be staged with the given mode and owner,
// and returns its staged name: name in into, or a new name at the top of
// the staging directory when into is nil. wait says whether every file
// was staged.
func (s *stager) file(into *stageDir, name string, src int, p string, mode uint32, uid, gid int, st *unix.Statx_t) string {
	if into == nil {
		s.n++
		name = strconv.Itoa(s.n)
	}
	if s.failed.Load() {
		unix.Close(src)
		return name
	}
	if s.jobs == nil {
		s.jobs = make(chan stageJob, 64)
		for w := stageWorkers(); w > 0; w-- {
			s.wg.Add(1)
			go s.workAsCaller()
		}
	}
	if into != nil {
		into.refs.Add(1)
	}
	s.jobs <- stageJob{dir: into, src: src, name: name, path: p, mode: mode, uid: uid, gid: gid, size: int64(st.Size), atime: st.Atime, mtime: st.Mtime}
	return name
}

// stageDir is a directory made in the staging directory for a directory
// the workspace does not have, open (O_PATH) while the walk or a queued
// file needs it.
type stageDir struct {
	fd   int
	name string // at the top of the staging directory: its staged name
	refs atomic.Int32
}

func (d *stageDir) release() {
	if d.refs.Add(-1) == 0 {
		unix.Close(d.fd)
	}
}

// mkdir makes a directory to stage a new directory's entries in: name in
// into, or a new name at the top of the staging directory when into is
// nil. The caller releases it.
func (s *stager) mkdir(into *stageDir, name string) (*stageDir, error) {
	parent := s.fd
	d := &stageDir{}
	if into == nil {
		s.n++
		name = strconv.Itoa(s.n)
		d.name = name
	} else {
		parent = into.fd
	}
	if err := unix.Mkdirat(parent, name, 0o700); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d.fd = fd
	d.refs.Store(1)
	return d, nil
}

// symlink stages a symlink to target as name in into, with its owner and
// the times of st (the layer's).
func (s *stager) symlink(into *stageDir, name, target string, uid, gid int, st *unix.Statx_t) error {
	if err := unix.Symlinkat(target, into.fd, name); err != nil {
		return err
	}
	if s.chown {
		if err := unix.Fchownat(into.fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if nanos(st.Mtime) == 0 {
		return nil
	}
	ts := []unix.Timespec{{Sec: st.Atime.Sec, Nsec: int64(st.Atime.Nsec)}, {Sec: st.Mtime.Sec, Nsec: int64(st.Mtime.Nsec)}}
	return unix.UtimesNanoAt(into.fd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// work stages queued files until there are no more.
// workAsCaller is work on a thread with the caller's identity; a worker
// that cannot take it on fails the stage and only drains the queue.
func (s *stager) workAsCaller() {
	err := fsid.Do(s.caller, func() error { s.work(); return nil })
	if err != nil {
		s.fail(fmt.Errorf("stage: %w", err))
		s.work()
	}
}

func (s *stager) work() {
	defer s.wg.Done()
	buf := make([]byte, copyBuffer)
	for job := range s.jobs {
		if s.failed.Load() {
			job.done()
			continue
		}
		n, err := s.stageOne(&job, buf)
		job.done()
		if err != nil {
			s.fail(fmt.Errorf("stage %s: %w", job.path, err))
			continue
		}
		s.bytes.Add(n)
		if k := s.staged.Add(1); s.onStage != nil {
			s.onStage(k)
		}
	}
}

func (s *stager) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.failed.Store(true)
}

// wait waits for every queued file and returns the bytes staged, or the
// first error.
func (s *stager) wait() (int64, error) {
	if s.jobs != nil {
		close(s.jobs)
		s.wg.Wait()
		s.jobs = nil
	}
	return s.bytes.Load(), s.err
}

// stageOne copies job's file to its staged name, created with its final
// mode when the umask lets it (else fchmod'ed), owned as job says and
// with its times.
func (s *stager) stageOne(job *stageJob, buf []byte) (int64, error) {
	perm, chmod := uint32(0o600), true
	if job.mode&^0o777 == 0 && s.umask != noUmask && job.mode&s.umask == 0 {
		perm, chmod = job.mode, false
	}
	dir := s.fd
	if job.dir != nil {
		dir = job.dir.fd
	}
	fd, err := unix.Openat(dir, job.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return 0, err
	}
	n, err := copyFD(fd, job.src, job.size, buf)
	if err == nil && s.chown && (job.uid != s.euid || job.gid != s.egid) {
		err = unix.Fchown(fd, job.uid, job.gid)
	}
	if err == nil && chmod {
		err = unix.Fchmod(fd, job.mode)
	}
	if err == nil {
		ts := []unix.Timespec{{Sec: job.atime.Sec, Nsec: int64(job.atime.Nsec)}, {Sec: job.mtime.Sec, Nsec: int64(job.mtime.Nsec)}}
		err = unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return n, err
}

// discard removes the staging directory and what is left in it.
func (s *stager) discard() {
	s.wait()
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
	// Err is RecoverFailed when the commit could be neither finished
	// nor rolled back.
	Err string `json:"error,omitempty"`
}

// RecoverFailed is a Recovered's Err, shown in reports and by `sandboxd
// recover`: the cause (a journal's path, an errno) is in Recover's error.
const RecoverFailed = "the interrupted commit could not be finished or rolled back; its journal is left in place for the next `sandboxd recover`"

// Recover finishes or rolls back every interrupted commit recorded in
// stateDir, skipping those whose process still runs. Commits of any
// workspace are recovered.
//
// It works as caller (package fsid): a journal can make it change only
// what the caller itself may, whatever workspace the journal names.
func Recover(stateDir string, caller fsid.ID, log *slog.Logger) (out []Recovered, err error) {
	aerr := fsid.Do(caller, func() error {
		out, err = recoverAll(stateDir, caller, log)
		return nil
	})
	if aerr != nil {
		return nil, fmt.Errorf("layer: recover: %w", aerr)
	}
	return out, err
}

// recoverAll is Recover on a thread with the caller's identity.
func recoverAll(stateDir string, caller fsid.ID, log *slog.Logger) ([]Recovered, error) {
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
		r, err := recoverOne(j, caller, log)
		if err != nil {
			r.Err = RecoverFailed // the cause is in the error returned, for the caller's log
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

func recoverOne(j *journal, caller fsid.ID, log *slog.Logger) (Recovered, error) {
	b, err := os.ReadFile(j.path(".journal"))
	if errors.Is(err, os.ErrNotExist) {
		return Recovered{RunID: j.id, Action: "gone"}, nil // finished meanwhile
	}
	if err != nil {
		return Recovered{RunID: j.id}, fmt.Errorf("layer: recover %s: %w", j.id, err)
	}
	if err := json.Unmarshal(b, &j.rec); err != nil || j.rec.Version < 1 || j.rec.Version > journalVersion || j.rec.RunID != j.id {
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
	s := &stager{dir: j.rec.Stage, inWS: j.rec.StageInWS, ws: ws, chown: caller.UID == 0, caller: caller, euid: caller.UID, egid: caller.GID, umask: caller.Umask & 0o777, replay: true}
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
	a := &applier{ws: ws, s: s, j: j, out: &out, runID: j.id}
	for i := last + 1; i < len(j.rec.Ops); i++ {
		// Each op still checks that the workspace holds what the plan saw
		// (it may have been edited since the crash), except a removal
		// that was under way at the crash: it may be half done, and is
		// finished (nothing after it was applied: see applier.apply).
		check := i > last+1 || j.rec.Ops[i].Kind != "remove"
		if err := a.apply(i, &j.rec.Ops[i], check); err != nil {
			s.discardFD()
			return r, fmt.Errorf("layer: recover %s: %s %s: %w", j.id, j.rec.Ops[i].Kind, j.rec.Ops[i].Path, err)
		}
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
	r := bufio.NewReader(io.LimitReader(f, 64<<20))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// The end, or a line a crash cut short (records are written
			// in batches): only whole lines count.
			return last
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(line, "\n")); err == nil && n > last {
			last = n
		}
	}
}
