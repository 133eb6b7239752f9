package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Snapshot is the log as it stood at one moment: its files open, their
// lengths and the signed head taken under the writers' lock, read after
// it is released, so a reader (a user fetching a view over the daemon's
// socket, however slowly) never holds up a writer and never sees a line
// a writer has half written.
type Snapshot struct {
	parts []snapPart
	head  []byte
}

type snapPart struct {
	f    *os.File
	size int64
}

// Snapshot takes the log as it stands. Close it.
func (l *Log) Snapshot(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{}
	err := l.locked(ctx, func(context.Context) error {
		files, err := Files(l.cfg.Dir)
		if err != nil {
			return err
		}
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				return fmt.Errorf("audit: open %s: %w", name, err)
			}
			st, err := f.Stat()
			if err != nil {
				f.Close()
				return fmt.Errorf("audit: stat %s: %w", name, err)
			}
			s.parts = append(s.parts, snapPart{f, st.Size()})
		}
		s.head, err = os.ReadFile(filepath.Join(l.cfg.Dir, HeadName))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return err
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Head is the signed head as it stood (nil: none), which a reader puts
// beside the view it verifies.
func (s *Snapshot) Head() []byte { return s.head }

// View writes the snapshot as View would write its files.
func (s *Snapshot) View(ctx context.Context, keep func(Record) bool, w io.Writer) error {
	rd := bufio.NewReaderSize(nil, 2*MaxLine)
	each := func(fn func(string, int, []byte) error) error {
		for _, p := range s.parts {
			if err := linesFrom(ctx, p.f.Name(), io.NewSectionReader(p.f, 0, p.size), rd, fn); err != nil {
				return err
			}
		}
		return nil
	}
	return view(ctx, each, keep, w)
}

// Close closes the snapshot's files.
func (s *Snapshot) Close() error {
	for _, p := range s.parts {
		p.f.Close()
	}
	s.parts = nil
	return nil
}
