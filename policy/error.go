package policy

import "fmt"

// Error describes a problem with a policy file, or with the policy a run
// resolves from its files (File is then empty, and "policy" stands for
// it). Its message has the form "FILE:LINE: KEY: MESSAGE", every part
// of which is the user's own text or the policy package's words about
// it: a front end may show it. Line is 0 only for problems with the file as a
// whole (for example an unreadable file); Key is empty when no key applies
// (for example a syntax error).
type Error struct {
	File string // file name as given to Load or Parse
	Line int    // 1-based line, 0 when the problem concerns the whole file
	Key  string // dotted key such as "limits.pids", or empty
	Msg  string // human-readable description

	cause error // underlying error, if any (see Unwrap)
}

// Error formats the error as "FILE:LINE: KEY: MESSAGE", leaving out the line
// when it is 0 and the key when it is empty.
func (e *Error) Error() string {
	if e.File == "" {
		c := *e
		c.File = "policy"
		return c.Error()
	}
	switch {
	case e.Line > 0 && e.Key != "":
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.Key != "":
		return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
	default:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
}

// Unwrap returns the underlying error (such as an *fs.PathError cause), or
// nil.
func (e *Error) Unwrap() error { return e.cause }
