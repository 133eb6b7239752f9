package agentinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/pelletier/go-toml/v2"
	"github.com/sandboxd/sandboxd/atomicfile"
	"github.com/sandboxd/sandboxd/publicerr"
)

// maxFile bounds an agent's file: a settings file is a few KiB, and
// anything this large is not one to edit.
const maxFile = 4 << 20

const (
	formatJSON = "json"
	formatTOML = "toml"
)

// agentFile is one of an agent's files, read and parsed.
type agentFile struct {
	path   string // as the agent names it
	target string // where its bytes are: a symbolic link's target
	shown  string // for the person, ~ for the home
	exists bool
	mode   fs.FileMode
	uid    int
	gid    int
	orig   []byte
	doc    doc
}

// readAgentFile reads path (format json or toml). A file that is not
// one the installer can edit is a public error naming it.
func readAgentFile(path, shown, format string) (*agentFile, error) {
	f := &agentFile{path: path, target: path, shown: shown, mode: 0o600, uid: -1, gid: -1}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, f.parse(format)
	case err != nil:
		return nil, publicerr.Errorf(err, "%s cannot be read; nothing was changed", shown)
	case fi.Mode()&fs.ModeSymlink != 0:
		if f.target, err = filepath.EvalSymlinks(path); err != nil {
			return nil, publicerr.Errorf(err, "%s is a symbolic link to a file that cannot be reached; nothing was changed", shown)
		}
		if fi, err = os.Stat(f.target); err != nil {
			return nil, publicerr.Errorf(err, "%s cannot be read; nothing was changed", shown)
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, publicerr.Errorf(nil, "%s is not a regular file; nothing was changed", shown)
	}
	f.exists, f.mode = true, fi.Mode().Perm()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		f.uid, f.gid = int(st.Uid), int(st.Gid)
	}
	if f.orig, err = readBounded(f.target); err != nil {
		return nil, publicerr.Errorf(err, "%s cannot be read; nothing was changed", shown)
	}
	return f, f.parse(format)
}

func readBounded(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxFile+1))
	if err == nil && len(b) > maxFile {
		err = errors.New("file too large")
	}
	return b, err
}

func (f *agentFile) parse(format string) error {
	if format == formatTOML {
		d, err := parseTOMLDoc(f.orig)
		if err != nil {
			return publicerr.Errorf(err, "%s is not valid TOML%s; fix it and run this again (nothing was changed)", f.shown, tomlWhere(err))
		}
		f.doc = tomlFile{d}
		return nil
	}
	d, err := parseJSONDoc(f.orig)
	var dup *duplicateError
	switch {
	case errors.As(err, &dup):
		return publicerr.Errorf(err, "%s has the key %q twice in one object, and which one the agent reads is not the installer's guess; fix it and run this again (nothing was changed)", f.shown, dup.key)
	case errors.Is(err, errShape):
		return publicerr.Errorf(err, "%s does not hold a JSON object; fix it and run this again (nothing was changed)", f.shown)
	case err != nil:
		return publicerr.Errorf(err, "%s is not valid JSON%s; fix it and run this again (nothing was changed)", f.shown, jsonWhere(f.orig))
	}
	f.doc = jsonFile{d}
	return nil
}

// tomlWhere is where go-toml found the error, for the person.
func tomlWhere(err error) string {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return " (line " + strconv.Itoa(row) + ")"
	}
	return ""
}

// jsonWhere is the line of the first syntax error in b.
func jsonWhere(b []byte) string {
	var v any
	var se *json.SyntaxError
	if errors.As(json.Unmarshal(b, &v), &se) && se.Offset > 0 && int(se.Offset) <= len(b) {
		return " (line " + strconv.Itoa(bytes.Count(b[:se.Offset], []byte{'\n'})+1) + ")"
	}
	return ""
}

// before is what the record says was there.
func (f *agentFile) before() string {
	switch {
	case !f.exists:
		return beforeAbsent
	case len(bytes.TrimSpace(f.orig)) == 0:
		return beforeEmpty
	}
	return beforeContent
}

// changed says whether the edited text differs from the file.
func (f *agentFile) changed() bool { return !f.exists || !bytes.Equal(f.doc.bytes(), f.orig) }

// write replaces the file's contents atomically, keeping its mode and,
// where the caller may, its owner and group (note says when not); a new
// file is the caller's alone, in a directory that is too.
func (f *agentFile) write(data []byte) (note string, err error) {
	if err := os.MkdirAll(filepath.Dir(f.target), 0o700); err != nil {
		return "", publicerr.Errorf(err, "the directory of %s could not be made", f.shown)
	}
	if err := atomicfile.WriteFileSync(f.target, data, f.mode); err != nil {
		return "", publicerr.Errorf(err, "%s could not be written", f.shown)
	}
	// The umask may have taken bits off; the owner is the writer's.
	if err := os.Chmod(f.target, f.mode); err != nil {
		return "", publicerr.Errorf(err, "%s was written but its permissions could not be kept", f.shown)
	}
	if f.uid < 0 {
		return "", nil
	}
	fi, err := os.Stat(f.target)
	if err != nil {
		return "", publicerr.Errorf(err, "%s was written but cannot be read back", f.shown)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == f.uid && int(st.Gid) == f.gid) {
		return "", nil
	}
	switch err := os.Lchown(f.target, f.uid, f.gid); {
	case errors.Is(err, fs.ErrPermission):
		// Only root gives a file to another owner or a group it is not
		// in; the file is the caller's now, its mode as it was.
		return "its owner or group is now yours (only root could have kept them)", nil
	case err != nil:
		return "", publicerr.Errorf(err, "%s was written but its owner could not be kept", f.shown)
	}
	return "", nil
}

// remove deletes a file install created, when it is still a regular
// file (not a link the user put there since).
func (f *agentFile) remove() error {
	fi, err := os.Lstat(f.path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.Remove(f.path); err != nil {
		return publicerr.Errorf(err, "%s could not be removed", f.shown)
	}
	return nil
}
