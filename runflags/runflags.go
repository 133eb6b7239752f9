package runflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/publicerr"
)

// The reviewer modes --reviewer takes (session's ReviewAuto, ReviewOff,
// ReviewHuman and ReviewModel; a test holds them equal).
const (
	ReviewAuto  = "auto"
	ReviewOff   = "off"
	ReviewHuman = "human"
	ReviewModel = "model"
)

// Flags are the flags of `sandboxd run`.
type Flags struct {
	Workspace        string
	Policy           string
	Report           string
	Reviewer         string
	Intent           string
	IntentFile       string
	Agent            string
	Session          string
	Timeout          time.Duration
	Retries          int
	RequireIsolation bool
	NoTransaction    bool
	Command          string
	Verbose          bool
	Detect           string
	Daemon           bool
	NoDaemon         bool
}

// Duration is a duration whose parse error names the fix.
type Duration time.Duration

func (d *Duration) String() string { return time.Duration(*d).String() }

func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("%q needs a unit: %ss, %sm or %sh", s, s, s, s)
		}
		return fmt.Errorf("%q is not a duration (e.g. 90s, 5m, 1h30m)", s)
	}
	*d = Duration(v)
	return nil
}

// Parse parses run's command line into its flags and the command's
// argv. When -h asks for help it returns flag.ErrHelp (and fs, whose
// defaults the usage shows).
func Parse(args []string) (f *Flags, argv []string, fs *flag.FlagSet, err error) {
	f = &Flags{}
	fs = FlagSet(f)
	if err := fs.Parse(args); err != nil {
		return nil, nil, fs, err
	}
	argv, err = check(f, args, fs)
	if err != nil {
		return nil, nil, fs, err
	}
	return f, argv, fs, nil
}

// check checks the parsed flags and finds the command.
func check(f *Flags, args []string, fs *flag.FlagSet) ([]string, error) {
	switch f.Reviewer {
	case ReviewAuto, ReviewOff, ReviewHuman, ReviewModel:
	default:
		return nil, fmt.Errorf("--reviewer must be auto, model, human or off, not %q", f.Reviewer)
	}
	if f.Intent != "" && f.IntentFile != "" {
		return nil, errors.New("give either --intent or --intent-file, not both")
	}
	if !ValidAgent(f.Agent) {
		return nil, fmt.Errorf("--agent must be 1 to 32 lowercase letters, digits or dashes, not %q", f.Agent)
	}
	if f.Detect != "auto" && f.Detect != "off" {
		return nil, fmt.Errorf("--detect must be auto or off, not %q", f.Detect)
	}
	if f.Retries < 0 {
		return nil, fmt.Errorf("--retries must not be negative")
	}
	if f.Timeout < 0 {
		return nil, fmt.Errorf("--timeout must not be negative")
	}
	return commandArgv(args, fs, f.Command)
}

// commandArgv is the command run runs, from its parsed command line: -c's
// shell command with bash -c, else what follows the flags. Each mistake
// gets its own sentence.
func commandArgv(args []string, fs *flag.FlagSet, command string) ([]string, error) {
	rest := fs.Args()
	c := false
	fs.Visit(func(f *flag.Flag) { c = c || f.Name == "c" })
	// The flag package drops the "--" that ends the flags. There was one
	// when the arguments before rest end in "--" and parse on their own:
	// a "--" taken as a flag's value (--intent --) leaves that flag
	// without one.
	n := len(args) - len(rest)
	dashes := n > 0 && args[n-1] == "--" && FlagSet(&Flags{}).Parse(args[:n-1]) == nil
	switch {
	case !c && len(rest) > 0:
		return rest, nil
	case !c && dashes:
		return nil, errors.New("no command after --: use -- COMMAND [ARG...]")
	case !c:
		return nil, errors.New("no command: use -c 'command' or -- COMMAND [ARG...]")
	case command == "--":
		return nil, errors.New(`-c takes the shell command as its value, not "--": use -c 'command' or -- COMMAND [ARG...]`)
	case command == "":
		return nil, errors.New("-c needs a shell command, not an empty string")
	case len(rest) > 0 && dashes:
		return nil, errors.New("give either -c 'command' or -- COMMAND [ARG...], not both")
	case len(rest) > 0:
		what := "extra argument"
		if len(rest) > 1 {
			what += "s"
		}
		return nil, fmt.Errorf("%s %s after -c 'command': -c takes the whole shell command as one argument (quote it)", what, quoted(rest))
	}
	return []string{"bash", "-c", command}, nil
}

// FlagSet is run's flags, parsed into f.
func FlagSet(f *Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("sandboxd run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.Workspace, "workspace", "", "the writable root (default: the top level of the git repository the\n"+
		"current directory is in, else the nearest directory at or above it\n"+
		"holding a .sandboxd.toml, else the current directory; a root that is\n"+
		"not yours, /, a temporary directory, your home or above is passed over)")
	fs.StringVar(&f.Policy, "policy", "", "policy file (default: ~/.config/sandboxd/policy.toml)")
	fs.StringVar(&f.Report, "report", "", "write a JSON report of the run to this file")
	fs.StringVar(&f.Reviewer, "reviewer", "auto", "who reviews boundaries: auto (the model when configured, else a person at the terminal, else off), model, human or off")
	fs.StringVar(&f.Intent, "intent", "", "the user's request, evidence for the reviewer")
	fs.StringVar(&f.IntentFile, "intent-file", "", "read the user's request from this file (at most 64 KiB), as an agent's hook leaves it")
	fs.StringVar(&f.Agent, "agent", "cli", "the agent asking, for the reviewer and the report")
	fs.StringVar(&f.Session, "session", "", "session id")
	fs.Var((*Duration)(&f.Timeout), "timeout", "end the command after this long: a `duration` such as 90s or 5m (exit 124)")
	fs.IntVar(&f.Retries, "retries", 2, "automatic retries after granted boundaries")
	fs.BoolVar(&f.RequireIsolation, "require-isolation", false, "fail (exit 125) instead of running without namespaces")
	fs.BoolVar(&f.Daemon, "daemon", false, "run through the daemon (sandboxd serve; its socket: $SANDBOXD_SOCKET, else "+client.DefaultSocket+"), and fail when it cannot be reached (without it or --no-daemon: through the daemon when its socket is there and trusted)")
	fs.BoolVar(&f.NoDaemon, "no-daemon", false, "run here, never through the daemon")
	fs.BoolVar(&f.NoTransaction, "no-transaction", false, "write straight to the workspace")
	fs.StringVar(&f.Detect, "detect", "auto", "boundary detection: auto, or off (denials are enforced but not reported or reviewed)")
	fs.StringVar(&f.Command, "c", "", "run this string with bash -c")
	fs.BoolVar(&f.Verbose, "v", false, "log what sandboxd does, and the internal cause of any failure, to stderr")
	return fs
}

// ValidAgent: an agent's name is a short lowercase word.
func ValidAgent(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// quoted is args, each in Go's quotes, space-separated.
func quoted(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// maxIntent bounds an intent file: the request is evidence for a model
// whose prompt has a budget, and the file is read whole.
const maxIntent = 64 << 10

// ReadIntent is the text of an intent file, which must be a regular file
// of at most maxIntent bytes; text that is not UTF-8 is made so.
func ReadIntent(path string) (string, error) {
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", publicerr.Wrap(err, fmt.Sprintf("the intent file %s does not exist", path))
	case errors.Is(err, fs.ErrPermission):
		return "", publicerr.Wrap(err, fmt.Sprintf("the intent file %s may not be read", path))
	case err != nil:
		return "", publicerr.Wrap(err, fmt.Sprintf("the intent file %s cannot be read", path))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", publicerr.New(fmt.Sprintf("the intent file %s is not a regular file", path))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIntent+1))
	switch {
	case err != nil:
		return "", publicerr.Wrap(err, fmt.Sprintf("the intent file %s cannot be read", path))
	case len(b) > maxIntent:
		return "", publicerr.New(fmt.Sprintf("the intent file %s is larger than %d KiB", path, maxIntent>>10))
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}
