package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// rotateLocked closes the live file with a checkpoint, renames it after
// its first record's seq and starts an empty live file; the next record
// links to the checkpoint, so the chain runs on across files. Other
// writers see the live path name another file and reopen it.
func (l *Log) rotateLocked(t tail) (tail, error) {
	var err error
	if t.kind != KindCheckpoint {
		if t, err = l.checkpointLocked(t); err != nil {
			return t, err
		}
	}
	first, err := firstSeq(l.f)
	if err != nil {
		return t, err
	}
	rotated := filepath.Join(l.cfg.Dir, rotatedName(first))
	if _, err := os.Lstat(rotated); !errors.Is(err, fs.ErrNotExist) {
		return t, fmt.Errorf("audit: rotate: %s is already there", rotated)
	}
	if err := os.Rename(l.Path(), rotated); err != nil {
		return t, fmt.Errorf("audit: rotate: %w", err)
	}
	if err := l.liveLocked(); err != nil {
		return t, err
	}
	if err := syncDir(l.cfg.Dir); err != nil {
		return t, err
	}
	t.size = 0
	return l.retainLocked(t)
}

// firstSeq reads the seq of f's first line.
func firstSeq(f io.ReaderAt) (uint64, error) {
	buf := make([]byte, MaxLine)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("audit: read the log's start: %w", err)
	}
	var h lineHead
	i := bytes.IndexByte(buf[:n], '\n')
	if i < 0 || !readHead(buf[:i], &h) {
		return 0, errors.New("audit: the log's first line is not a record")
	}
	return h.seq, nil
}

// retainLocked removes the oldest rotated files that retention no longer
// keeps. It first appends a retention record naming them and the last
// record they hold, and signs it, so a verifier accepts their absence; a crash
// before the removal leaves files the record allows to be gone.
func (l *Log) retainLocked(t tail) (tail, error) {
	if l.cfg.RetainAge <= 0 && l.cfg.RetainBytes <= 0 {
		return t, nil
	}
	files, err := Files(l.cfg.Dir)
	if err != nil {
		return t, err
	}
	if n := len(files); n > 0 && filepath.Base(files[n-1]) == LogName {
		files = files[:n-1]
	}
	var sizes []int64
	var mtimes []time.Time
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return t, fmt.Errorf("audit: retention: %w", err)
		}
		sizes, mtimes = append(sizes, st.Size()), append(mtimes, st.ModTime())
	}
	k := retainCount(sizes, mtimes, l.now(), l.cfg.RetainAge, l.cfg.RetainBytes)
	if k == 0 {
		return t, nil
	}
	gone := files[:k]
	r, err := l.retentionRecord(t, gone)
	if err != nil {
		return t, err
	}
	if t, err = l.writeLocked(t, r); err != nil {
		return t, err
	}
	// Signed (and synced) before anything is removed: a verifier takes a
	// retention record only under a checkpoint, or anyone who can write
	// the files could append one and remove the oldest.
	if t, err = l.checkpointLocked(t); err != nil {
		return t, err
	}
	for _, f := range gone {
		if err := os.Remove(f); err != nil {
			l.cfg.Log.Warn("audit retention could not remove a file", "file", f, "err", err)
		}
	}
	return t, nil
}

// retentionRecord is the record that follows t and says gone (the
// oldest rotated files, in order) are removed.
func (l *Log) retentionRecord(t tail, gone []string) (*Record, error) {
	f, err := os.Open(gone[0])
	if err != nil {
		return nil, fmt.Errorf("audit: retention: %w", err)
	}
	first, err := firstSeq(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	f, err = os.Open(gone[len(gone)-1])
	if err != nil {
		return nil, fmt.Errorf("audit: retention: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: retention: %w", err)
	}
	line, cut, err := lastLine(f, st.Size())
	if err == nil && cut >= 0 {
		err = fmt.Errorf("audit: %s ends in a cut-short line", gone[len(gone)-1])
	}
	if err != nil {
		return nil, err
	}
	last, err := tailOf(line)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(gone))
	for i, g := range gone {
		names[i] = filepath.Base(g)
	}
	return &Record{Seq: t.seq + 1, Prev: t.hashHex(), Time: l.now(), Event: Event{Kind: KindRetention},
		Retention: &Retention{Chain: l.chain, Files: names, FirstSeq: first, LastSeq: last.seq, LastHash: last.hashHex()}}, nil
}

// retainCount is how many of the oldest rotated files (sizes and
// modification times, oldest first) retention removes: a prefix, so the
// files kept still form one chain.
func retainCount(sizes []int64, mtimes []time.Time, now time.Time, age time.Duration, maxBytes int64) int {
	var total int64
	for _, s := range sizes {
		total += s
	}
	k := 0
	for k < len(sizes) {
		old := age > 0 && now.Sub(mtimes[k]) > age
		big := maxBytes > 0 && total > maxBytes
		if !old && !big {
			break
		}
		total -= sizes[k]
		k++
	}
	return k
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
	}
	return nil
}
