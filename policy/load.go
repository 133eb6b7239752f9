package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/filecache"
)

// maxFileSize bounds the size of a policy file.
const maxFileSize = 1 << 20

// Load reads the user policy then the workspace policy and merges them.
//
// userPath is the user policy file. When userExplicit is false (the default
// location) and the file does not exist, the built-in defaults are used
// silently; when userExplicit is true, a missing file is an error. wsPaths are
// the workspace policy (<workspace>/.sandboxd.toml), then those of the
// directories between the workspace and the command's working directory,
// each applied in turn; any may be missing or empty (no workspace
// policy). Unreadable files are errors. A workspace
// policy may only tighten what it is applied to (see Tighten). To keep a
// sandboxed command from turning it into a reader of other files, the
// workspace policy must be a regular file that is not a symbolic link and
// has a single hard link.
//
// All errors are *Error.
func Load(userPath string, userExplicit bool, wsPaths ...string) (Policy, error) {
	return LoadUnder(nil, userPath, userExplicit, wsPaths...)
}

// LoadUnder is Load under the machine policy m (nil: none, as Load): the
// user policy is merged under it (UnderMachine) before the workspace
// policies tighten the result.
func LoadUnder(m *Machine, userPath string, userExplicit bool, wsPaths ...string) (Policy, error) {
	return loader{schema: newSchema()}.load(m, userPath, userExplicit, wsPaths)
}

// loader reads and parses policy files for one load: through cache, for
// uid, when cache is not nil.
type loader struct {
	cache  *Cache
	uid    int
	schema *schema
}

// load is LoadUnder.
func (l loader) load(m *Machine, userPath string, userExplicit bool, wsPaths []string) (Policy, error) {
	user, userSet := Default(), KeySet{}
	f, err := l.userFile(userPath)
	switch {
	case err == nil:
		user, userSet = f.apply(user), f.keys
	case errors.Is(err, fs.ErrNotExist) && !userExplicit:
		// No user policy: defaults.
	default:
		return Policy{}, err
	}
	if m != nil {
		if user, err = mergeUnderMachine(l.schema, *m, user, userPath, userSet); err != nil {
			return Policy{}, err
		}
	}

	for _, wsPath := range wsPaths {
		if wsPath == "" {
			continue
		}
		if user, err = l.tightenWith(user, wsPath); err != nil {
			return Policy{}, err
		}
	}
	return user, nil
}

// tightenWith tightens p with the workspace policy at wsPath, if any.
func (l loader) tightenWith(p Policy, wsPath string) (Policy, error) {
	f, err := l.workspaceFile(wsPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return Policy{}, err
	}
	return tighten(l.schema, p, f.apply(p), wsPath, f.keys)
}

// fileError wraps an error reading a whole file.
func fileError(name string, err error) *Error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// The syscall's reason, as sandboxd gives a kernel's: in
		// parentheses after its own words.
		return &Error{File: name, Msg: "cannot read policy file (" + sanitize(pe.Err.Error()) + ")", cause: err}
	}
	return &Error{File: name, Msg: "cannot read policy file: " + sanitize(err.Error()), cause: err}
}

// userFile reads and parses the user policy (symbolic links are
// followed). Every error is an *Error; one of a file that does not
// exist wraps fs.ErrNotExist.
func (l loader) userFile(name string) (*parsedFile, error) {
	if name == "" {
		return nil, fileError(name, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist})
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(name, err)
	}
	defer f.Close()
	return l.parse(name, f, false)
}

// workspaceFile reads and parses the workspace policy without following
// a symbolic link in the last component and refuses files with several
// hard links, so that the file cannot stand in for another file of the
// user's. Errors are as userFile's.
func (l loader) workspaceFile(name string) (*parsedFile, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = errors.New("is a symbolic link; a workspace policy must be a regular file")
		}
		return nil, fileError(name, err)
	}
	defer f.Close()
	return l.parse(name, f, true)
}

// parse describes the open policy file f and returns what it sets: kept
// in l.cache when the file is as it was when kept, else read (a regular
// file of at most maxFileSize bytes; for a workspace policy, of a single
// hard link) and parsed, and kept when it had settled before this read.
func (l loader) parse(name string, f *os.File, workspace bool) (*parsedFile, error) {
	start := time.Now()
	info, err := f.Stat()
	if err != nil {
		return nil, fileError(name, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fileError(name, errors.New("no file status"))
	}
	regular := st.Mode&syscall.S_IFMT == syscall.S_IFREG
	if workspace && regular && st.Nlink > 1 {
		return nil, fileError(name, fmt.Errorf("has %d hard links; a workspace policy must have exactly one", st.Nlink))
	}
	if !regular {
		return nil, fileError(name, errors.New("not a regular file"))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fileError(name, err)
	}
	if len(data) > maxFileSize {
		return nil, fileError(name, fmt.Errorf("larger than %d bytes", maxFileSize))
	}
	fst := filecache.StatOf(st)
	if l.cache != nil {
		if p, ok := l.cache.files.Get(l.uid, name, fst, data); ok {
			return p, nil
		}
	}
	p, err := decodeDoc(l.schema, name, data, "")
	switch {
	case l.cache == nil:
	case err != nil:
		l.cache.files.Forget(l.uid, name)
	default:
		l.cache.files.Keep(l.uid, name, fst, start, data, p)
	}
	return p, err
}
