package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WriteFile replaces path with data, atomically against a crash of the
// process but not durably (see the package doc).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

// WriteFileSync replaces path with data, atomically and durably: when it
// returns nil the new contents and the rename are on stable storage.
func WriteFileSync(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

// RemoveLeftovers removes the temporary files an interrupted WriteFile or
// WriteFileSync of path left beside it. Call it only when no write of
// path can be under way (under the lock that orders the writes, say): it
// would remove that write's temporary file.
func RemoveLeftovers(path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix(base)) && !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func tempPrefix(base string) string { return "." + base + ".tmp-" }

func write(path string, data []byte, perm fs.FileMode, sync bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return &fs.PathError{Op: "atomicfile", Path: path, Err: errors.New("no file name")}
	}
	f, err := createTemp(dir, base, perm)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if sync {
		// The rename is an entry in the directory: durable only once the
		// directory is synced.
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("sync directory of %s: %w", path, err)
		}
	}
	return nil
}

// createTemp is os.CreateTemp with the caller's permissions (before the
// umask), as os.WriteFile would create the file.
func createTemp(dir, base string, perm fs.FileMode) (*os.File, error) {
	for try := 0; ; try++ {
		var b [6]byte
		rand.Read(b[:])
		name := filepath.Join(dir, tempPrefix(base)+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
