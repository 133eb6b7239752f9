package audit

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Summary is what Verify read.
type Summary struct {
	Files       int    // files read
	Records     int    // lines, checkpoints, the genesis and a view's stubs included
	Checkpoints int    // signed checkpoints
	FirstSeq    uint64 // the first record's seq
	LastSeq     uint64 // the last record's seq
	LastSigned  uint64 // the last checkpoint's seq: records after it are chained but not yet signed
}

// Problem names the first record Verify could not accept.
type Problem struct {
	File string // the file it is in
	Line int    // its line, from 1 (0: the file itself)
	Seq  uint64 // its seq, as far as it could be read
	What string // a plain sentence
}

func (p *Problem) Error() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.File, p.What)
	}
	return fmt.Sprintf("%s:%d: record %d: %s", p.File, p.Line, p.Seq, p.What)
}

// verifier is one pass over a set of files. It hashes each line once,
// reads only the prefix of ordinary records (readHead) and decodes only
// the log's own records; no per-record allocation.
type verifier struct {
	pub     ed25519.PublicKey
	fp      string
	head    *headFile
	headAt  string
	chain   string
	started bool
	seq     uint64   // the last line's seq
	hash    [32]byte // the last line's hash
	// anchor is the first line of a set that does not start with the
	// genesis: a retention record must account for what came before.
	anchor     *Problem
	anchorPrev [32]byte
	// view: the set is a view (View), whose stubs stand for lines the
	// reader may not see; in a log's own files a stub is a record
	// emptied of its content, and refused.
	view bool
	// retainedAt is the seq of the retention record that accounts for
	// the records before the set (0: none needed yet): it counts only
	// once a checkpoint after it is signed.
	retainedAt uint64
	sum        Summary
	file       string
	line       int
	lh         lineHead
}

// Verify checks files, in chain order (Files gives a log's), against
// pub: every line links to the one before it, seqs follow each other,
// every checkpoint is signed by pub for the chain, the set starts at the
// genesis or where a retention record says files were removed, and the
// signed head beside the live log (HeadName, when the last file is
// LogName, or a rotated file where no live file is: headBeside) names a
// checkpoint the set holds. The head is read before the
// files, so a writer appending meanwhile does not make it look ahead of
// them. A view (View) verifies the same, its stubs standing for their
// lines. The error is a *Problem for the first record that fails.
func Verify(ctx context.Context, files []string, pub ed25519.PublicKey) (Summary, error) {
	return verify(ctx, files, pub, false)
}

// VerifyView is Verify of a view (View): a stub stands for the line it
// names. Only a view may hold stubs: in a log's own files one is a
// record emptied of its content.
func VerifyView(ctx context.Context, files []string, pub ed25519.PublicKey) (Summary, error) {
	return verify(ctx, files, pub, true)
}

func verify(ctx context.Context, files []string, pub ed25519.PublicKey, view bool) (Summary, error) {
	v := &verifier{pub: pub, fp: fingerprint(pub), view: view}
	if len(files) == 0 {
		return v.sum, &Problem{File: ".", What: "there is no file to verify"}
	}
	if last := files[len(files)-1]; headBeside(last) {
		v.headAt = filepath.Join(filepath.Dir(last), HeadName)
		h, err := loadHead(v.headAt, pub)
		if errors.Is(err, errHeadSig) {
			return v.sum, &Problem{File: v.headAt, What: "the head file is not signed by the published key"}
		}
		if err != nil {
			return v.sum, err
		}
		v.head = h
	}
	rd := bufio.NewReaderSize(nil, 2*MaxLine)
	for _, name := range files {
		if err := v.file1(ctx, name, rd); err != nil {
			return v.sum, err
		}
	}
	return v.sum, v.finish()
}

// headBeside reports whether the set that ends with last is checked
// against the head beside it: when it ends with the live file, and when
// it ends with a rotated file where the live file is gone (a writer
// makes a new one at once under the lock, so a missing live file is a
// cut, not a set someone chose to check in part).
func headBeside(last string) bool {
	if filepath.Base(last) == LogName {
		return true
	}
	st, err := os.Lstat(filepath.Join(filepath.Dir(last), LogName))
	return rotatedPattern.MatchString(filepath.Base(last)) && (err != nil || !st.Mode().IsRegular())
}

// file1 verifies one file's lines.
func (v *verifier) file1(ctx context.Context, name string, rd *bufio.Reader) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", name, err)
	}
	defer f.Close()
	v.file, v.line = name, 0
	v.sum.Files++
	rd.Reset(f)
	for {
		b, err := rd.ReadSlice('\n')
		if len(b) == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		v.line++
		if v.line%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull) || len(b) > MaxLine:
			return v.problem(v.seq+1, "the line is longer than a record may be")
		case errors.Is(err, io.EOF):
			return v.problem(v.seq+1, "the last line is cut short (it has no end of line)")
		case err != nil:
			return fmt.Errorf("audit: read %s: %w", name, err)
		}
		if err := v.record(b[:len(b)-1]); err != nil {
			return err
		}
	}
}

func (v *verifier) problem(seq uint64, format string, args ...any) *Problem {
	return &Problem{File: v.file, Line: v.line, Seq: seq, What: fmt.Sprintf(format, args...)}
}

// record checks one line, without its newline.
func (v *verifier) record(line []byte) error {
	h := &v.lh
	if !readHead(line, h) {
		return v.problem(v.seq+1, "the line is not a record of the log")
	}
	kind := Kind(h.kind)
	hash := h.hash
	if !h.stub {
		hash = sha256.Sum256(line)
	}
	if err := v.link(h, kind, line); err != nil {
		return err
	}
	switch {
	case h.stub && !v.view:
		return v.problem(h.seq, "the record was replaced by a bare link of the chain: only a view may hold one")
	case h.stub:
	case kind.own():
		if err := v.own(h, kind, line); err != nil {
			return err
		}
	case !flatObject(line):
		return v.problem(h.seq, "the line is not a whole record")
	}
	if v.head != nil && h.seq == v.head.Seq && (kind != KindCheckpoint || hex.EncodeToString(hash[:]) != v.head.Hash) {
		return v.problem(h.seq, "the head names a checkpoint here, but this record is not it: the log was cut or rewritten")
	}
	v.seq, v.hash = h.seq, hash
	v.sum.Records++
	v.sum.LastSeq = h.seq
	return nil
}

// link checks that the line follows the one before it.
func (v *verifier) link(h *lineHead, kind Kind, line []byte) error {
	if !v.started {
		v.started = true
		v.sum.FirstSeq = h.seq
		if kind == KindGenesis {
			if h.seq != 0 || hex.EncodeToString(h.prev[:]) != zeroHash {
				return v.problem(h.seq, "the genesis record does not start at seq 0")
			}
			return nil
		}
		v.anchor = v.problem(h.seq, "the set does not start the chain, and no retention record accounts for the records before it: a file is missing from the set")
		v.anchorPrev = h.prev
		return nil
	}
	switch {
	case kind == KindGenesis:
		return v.problem(h.seq, "a second chain starts here: a file of another log is in the set")
	case h.seq <= v.seq:
		return v.problem(h.seq, "it comes after record %d: records were reordered or repeated", v.seq)
	case h.prev != v.hash && v.line == 1:
		return v.problem(h.seq, "it does not follow the last record of the file before it: a file is missing from the set, or this file is of another log")
	case h.seq != v.seq+1:
		return v.problem(h.seq, "it comes after record %d: records were removed or inserted", v.seq)
	case h.prev != v.hash:
		// The first record that can be bad is the one before: an edit
		// of a record breaks the link of the next one to it.
		return &Problem{File: v.file, Line: v.line - 1, Seq: v.seq, What: fmt.Sprintf(
			"record %d does not follow it: this record was edited, or record %d's link to it, or records were removed or inserted between them",
			h.seq, h.seq)}
	}
	return nil
}

// own checks a record of the log's own kinds.
func (v *verifier) own(h *lineHead, kind Kind, line []byte) error {
	r, err := parseRecord(line)
	if err != nil || r.Event != (Event{Kind: kind}) || r.Hash != "" {
		return v.problem(h.seq, "the %s record is malformed", kind)
	}
	switch kind {
	case KindGenesis:
		if r.Genesis == nil || r.Checkpoint != nil || r.Retention != nil || len(r.Genesis.Chain) != 32 {
			return v.problem(h.seq, "the genesis record is malformed")
		}
		if r.Genesis.Key != v.fp {
			return v.problem(h.seq, "the chain was started by another key than the published one")
		}
		v.chain = r.Genesis.Chain
	case KindCheckpoint:
		if r.Checkpoint == nil || r.Genesis != nil || r.Retention != nil {
			return v.problem(h.seq, "the checkpoint record is malformed")
		}
		if err := v.sameChain(h.seq, r.Checkpoint.Chain); err != nil {
			return err
		}
		sig, err := base64.StdEncoding.DecodeString(r.Checkpoint.Sig)
		if err != nil || !ed25519.Verify(v.pub, checkpointMessage(r.Checkpoint.Chain, r.Seq, r.Prev, r.Time), sig) {
			return v.problem(h.seq, "the checkpoint is not signed by the published key")
		}
		v.sum.Checkpoints++
		v.sum.LastSigned = h.seq
	case KindRetention:
		if r.Retention == nil || r.Genesis != nil || r.Checkpoint != nil || r.Retention.LastSeq >= h.seq {
			return v.problem(h.seq, "the retention record is malformed")
		}
		if err := v.sameChain(h.seq, r.Retention.Chain); err != nil {
			return err
		}
		if v.anchor != nil && r.Retention.LastSeq+1 == v.anchor.Seq && r.Retention.LastHash == hex.EncodeToString(v.anchorPrev[:]) {
			v.anchor, v.retainedAt = nil, h.seq
		}
	}
	return nil
}

// sameChain: a set whose genesis was removed learns its chain from the
// first checkpoint or retention record; every later one must agree.
func (v *verifier) sameChain(seq uint64, chain string) error {
	if v.chain == "" {
		v.chain = chain
	}
	if chain != v.chain {
		return v.problem(seq, "it names another chain: a file of another log is in the set")
	}
	return nil
}

// finish checks what only the whole set can show.
func (v *verifier) finish() error {
	if v.anchor != nil {
		return v.anchor
	}
	if v.headAt != "" && v.head == nil && v.started && v.sum.LastSeq > 1 {
		// As the writer refuses to go on (Open): only the first
		// checkpoint, cut off by a crash, may lack its head.
		return &Problem{File: v.headAt, What: fmt.Sprintf("the signed head is missing, but the log holds records up to %d: records may have been cut from its end", v.sum.LastSeq)}
	}
	if v.retainedAt != 0 && v.sum.LastSigned < v.retainedAt {
		// Anyone who can write the files could append an unsigned one
		// and remove the oldest files with it.
		return &Problem{File: v.file, Seq: v.retainedAt,
			What: fmt.Sprintf("the retention record %d that accounts for the removed files is not signed by a checkpoint after it: files may have been removed by someone else", v.retainedAt)}
	}
	if v.head == nil {
		return nil
	}
	if v.chain != "" && v.head.Chain != v.chain {
		return &Problem{File: v.headAt, What: "the head file is of another log"}
	}
	if v.head.Seq > v.sum.LastSeq || !v.started {
		return &Problem{File: v.file, Line: v.line + 1, Seq: v.sum.LastSeq + 1,
			What: fmt.Sprintf("the log ends at record %d, but the head names checkpoint %d: records were cut from its end", v.sum.LastSeq, v.head.Seq)}
	}
	return nil
}

// parseTime reads a line's time text.
func parseTime(b []byte) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, string(b))
}
