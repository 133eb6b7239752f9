package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// tail is the last record of the chain as a writer reads it under the
// lock, and where the next one goes.
type tail struct {
	exists bool
	seq    uint64
	hash   [32]byte
	kind   Kind
	time   time.Time
	size   int64 // the live file's size: the next line's offset
}

func (t tail) hashHex() string { return hex.EncodeToString(t.hash[:]) }

// tailLocked opens the live file (again, if another writer rotated it
// since) and reads the chain's last record: from the live file, or from
// the newest rotated file when the live one is still empty. A line a
// failed writer left cut short at the end is removed first.
func (l *Log) tailLocked() (tail, error) {
	if err := l.liveLocked(); err != nil {
		return tail{}, err
	}
	st, err := l.f.Stat()
	if err != nil {
		return tail{}, fmt.Errorf("audit: stat log: %w", err)
	}
	size := st.Size()
	if size == 0 {
		t, err := l.rotatedTail()
		t.size = 0
		return t, err
	}
	line, cut, err := lastLine(l.f, size)
	if err != nil {
		return tail{}, err
	}
	if cut >= 0 {
		l.cfg.Log.Warn("audit log ends in a cut-short line; removing it", "file", l.f.Name(), "bytes", size-cut)
		if err := l.f.Truncate(cut); err != nil {
			return tail{}, fmt.Errorf("audit: remove a cut-short line: %w", err)
		}
		return l.tailLocked()
	}
	t, err := tailOf(line)
	t.size = size
	return t, err
}

// liveLocked makes l.f the file now at the live path, creating it when
// a rotation or a crash left none.
func (l *Log) liveLocked() error {
	path := l.Path()
	st, err := os.Stat(path)
	if err == nil && l.f != nil {
		if fst, ferr := l.f.Stat(); ferr == nil && os.SameFile(st, fst) {
			return nil
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audit: stat log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open log: %w", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f = f
	return nil
}

// rotatedTail reads the last record of the newest rotated file; none
// when there is no rotated file. A rotated file is never written again,
// so one that ends cut short is damage, not a writer's failure.
func (l *Log) rotatedTail() (tail, error) {
	files, err := Files(l.cfg.Dir)
	if err != nil {
		return tail{}, err
	}
	var last string
	for _, f := range files {
		if filepath.Base(f) != LogName {
			last = f
		}
	}
	if last == "" {
		return tail{}, nil
	}
	f, err := os.Open(last)
	if err != nil {
		return tail{}, fmt.Errorf("audit: open %s: %w", last, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tail{}, fmt.Errorf("audit: stat %s: %w", last, err)
	}
	line, cut, err := lastLine(f, st.Size())
	if err == nil && cut >= 0 {
		err = fmt.Errorf("audit: %s ends in a cut-short line", last)
	}
	if err != nil {
		return tail{}, err
	}
	return tailOf(line)
}

// lastLine reads the last whole line of f (size bytes), without its
// newline. When f does not end in a newline, cut is the offset just
// after the last one (0 if none): the cut-short line starts there.
func lastLine(f io.ReaderAt, size int64) (line []byte, cut int64, err error) {
	n := min(size, int64(MaxLine)+1)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-n); err != nil && !errors.Is(err, io.EOF) {
		return nil, -1, fmt.Errorf("audit: read the log's end: %w", err)
	}
	if buf[n-1] != '\n' {
		i := bytes.LastIndexByte(buf, '\n')
		if i < 0 && n < size {
			return nil, -1, errors.New("audit: the log's end is no line")
		}
		return nil, size - n + int64(i) + 1, nil
	}
	start := bytes.LastIndexByte(buf[:n-1], '\n') + 1
	if start == 0 && n < size {
		return nil, -1, errors.New("audit: the log's last line is over the limit")
	}
	return buf[start : n-1], -1, nil
}

// tailOf reads a last line's seq, kind and time, and hashes it.
func tailOf(line []byte) (tail, error) {
	var h lineHead
	if !readHead(line, &h) || h.stub {
		return tail{}, errors.New("audit: the log's last line is not a record")
	}
	t := tail{exists: true, seq: h.seq, hash: sha256.Sum256(line), kind: Kind(h.kind)}
	tm, err := parseTime(h.time)
	if err != nil {
		return tail{}, fmt.Errorf("audit: the log's last record has no time: %w", err)
	}
	t.time = tm
	return t, nil
}

// writeLocked writes r as the line after t (r's seq and prev must follow
// t) and returns the new tail. On a failed or short write it cuts the
// file back to where the line began, so the next writer finds the chain
// whole; should that fail too, the next writer removes the cut-short
// line (tailLocked).
func (l *Log) writeLocked(t tail, r *Record) (tail, error) {
	b, err := encodeBounded(r)
	if err != nil {
		return t, err
	}
	next := tail{exists: true, seq: r.Seq, hash: sha256.Sum256(b), kind: r.Kind, time: r.Time, size: t.size + int64(len(b)) + 1}
	b = append(b, '\n')
	n, err := l.f.WriteAt(b, t.size)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if terr := l.f.Truncate(t.size); terr != nil {
			err = errors.Join(err, fmt.Errorf("cut back: %w", terr))
		}
		return t, fmt.Errorf("audit: write record %d: %w", r.Seq, err)
	}
	return next, nil
}

// checkpointLocked signs the chain up to t, syncs the file, then writes
// the head naming the checkpoint.
func (l *Log) checkpointLocked(t tail) (tail, error) {
	r := Record{Seq: t.seq + 1, Prev: t.hashHex(), Time: l.now(), Event: Event{Kind: KindCheckpoint}}
	sig := ed25519.Sign(l.priv, checkpointMessage(l.chain, r.Seq, r.Prev, r.Time))
	r.Checkpoint = &Checkpoint{Chain: l.chain, Sig: base64.StdEncoding.EncodeToString(sig)}
	next, err := l.writeLocked(t, &r)
	if err != nil {
		return t, err
	}
	if err := l.f.Sync(); err != nil {
		return next, fmt.Errorf("audit: sync log: %w", err)
	}
	if err := writeHead(l.cfg.Dir, l.priv, headFile{Chain: l.chain, Seq: r.Seq, Hash: next.hashHex(), Time: r.Time}); err != nil {
		return next, err
	}
	return next, nil
}
