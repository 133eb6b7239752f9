package audit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
)

// View writes the log as View would write its files, as they stand now:
// the files are opened and their lengths taken under the writers' lock,
// then read after it is released, so a reader (a user fetching the view
// over the daemon's socket, however slowly) never holds up a writer, and
// never sees a line a writer has half written.
func (l *Log) View(ctx context.Context, keep func(Record) bool, w io.Writer) error {
	type part struct {
		f    *os.File
		size int64
	}
	var parts []part
	defer func() {
		for _, p := range parts {
			p.f.Close()
		}
	}()
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
			parts = append(parts, part{f, st.Size()})
		}
		return nil
	})
	if err != nil {
		return err
	}
	rd := bufio.NewReaderSize(nil, 2*MaxLine)
	each := func(fn func(string, int, []byte) error) error {
		for _, p := range parts {
			if err := linesFrom(ctx, p.f.Name(), io.NewSectionReader(p.f, 0, p.size), rd, fn); err != nil {
				return err
			}
		}
		return nil
	}
	return view(ctx, each, keep, w)
}
