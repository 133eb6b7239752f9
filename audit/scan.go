package audit

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// LogName is the file the writers append to; rotated files are named
// rotatedName(first seq), which sorts in chain order.
const LogName = "audit.jsonl"

var rotatedPattern = regexp.MustCompile(`^audit-[0-9]{20}\.jsonl$`)

func rotatedName(firstSeq uint64) string { return fmt.Sprintf("audit-%020d.jsonl", firstSeq) }

// Files is the rotation set in dir, in chain order: the rotated files
// oldest first, then the live log if it exists.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	var out []string
	live := false
	for _, e := range ents {
		switch {
		case !e.Type().IsRegular():
		case rotatedPattern.MatchString(e.Name()):
			out = append(out, filepath.Join(dir, e.Name()))
		case e.Name() == LogName:
			live = true
		}
	}
	sort.Strings(out)
	if live {
		out = append(out, filepath.Join(dir, LogName))
	}
	return out, nil
}

// Scan calls fn with each record of files, in order, decoded strictly
// (parseRecord); a view's stubs come as records with only Seq, Prev and
// Hash. It checks no chain: Verify does. A line it cannot decode is a
// *Problem; an error from fn ends the scan and is returned as is.
func Scan(ctx context.Context, files []string, fn func(Record) error) error {
	return eachLine(ctx, files, func(name string, line int, b []byte) error {
		r, err := parseRecord(b)
		if err != nil {
			return &Problem{File: name, Line: line, Seq: r.Seq, What: "the line is not a record of the log"}
		}
		return fn(r)
	})
}

// View writes the records of files to w, each one keep refuses replaced
// by a stub that keeps only its seq, its prev and its line's hash (no
// kind, uid or content); the log's own records (checkpoints, the
// genesis, retention) are always written whole. Verify accepts the view
// as it accepts the files: it is how the daemon lets a user check the
// records about them in the machine's log without showing another
// user's. A stub's hash is the hash of the line as the file holds it, so
// a line changed in the file breaks the view's chain too; what a view
// cannot show is a dishonest server's, which holds the key anyway.
func View(ctx context.Context, files []string, keep func(Record) bool, w io.Writer) error {
	return view(ctx, func(fn func(string, int, []byte) error) error { return eachLine(ctx, files, fn) }, keep, w)
}

// view is View over the lines each yields.
func view(ctx context.Context, each func(func(name string, line int, b []byte) error) error, keep func(Record) bool, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	err := each(func(name string, line int, b []byte) error {
		r, err := parseRecord(b)
		if err != nil {
			return &Problem{File: name, Line: line, Seq: r.Seq, What: "the line is not a record of the log"}
		}
		if r.Kind.own() || r.Hash != "" || keep(r) {
			bw.Write(b)
			return bw.WriteByte('\n')
		}
		sum := sha256.Sum256(b)
		stub, err := encodeLine(&Record{Seq: r.Seq, Prev: r.Prev, Hash: hex.EncodeToString(sum[:])})
		if err != nil {
			return err
		}
		bw.Write(stub)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audit: write view: %w", err)
	}
	return nil
}

// eachLine calls fn with every whole line of files, without its newline.
func eachLine(ctx context.Context, files []string, fn func(name string, line int, b []byte) error) error {
	rd := bufio.NewReaderSize(nil, 2*MaxLine)
	for _, name := range files {
		if err := linesOf(ctx, name, rd, fn); err != nil {
			return err
		}
	}
	return nil
}

func linesOf(ctx context.Context, name string, rd *bufio.Reader, fn func(string, int, []byte) error) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", name, err)
	}
	defer f.Close()
	return linesFrom(ctx, name, f, rd, fn)
}

// linesFrom calls fn with every whole line src holds (name says where
// it is from).
func linesFrom(ctx context.Context, name string, src io.Reader, rd *bufio.Reader, fn func(string, int, []byte) error) error {
	rd.Reset(src)
	for line := 1; ; line++ {
		b, err := rd.ReadSlice('\n')
		switch {
		case len(b) == 0 && errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, bufio.ErrBufferFull) || len(b) > MaxLine:
			return &Problem{File: name, Line: line, What: "the line is longer than a record may be"}
		case errors.Is(err, io.EOF):
			return &Problem{File: name, Line: line, What: "the last line is cut short (it has no end of line)"}
		case err != nil:
			return fmt.Errorf("audit: read %s: %w", name, err)
		}
		if line%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fn(name, line, b[:len(b)-1]); err != nil {
			return err
		}
	}
}
