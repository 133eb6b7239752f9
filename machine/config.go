package machine

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"

	"github.com/sandboxd/sandboxd/policy"
)

// DefaultPath is the machine configuration `sandboxd serve` reads when
// --config does not name another.
const DefaultPath = "/etc/sandboxd/sandboxd.toml"

// OpenAIBaseURL is the endpoint of a machine reviewer whose base_url is
// not set: never a caller's OPENAI_BASE_URL.
const OpenAIBaseURL = "https://api.openai.com/v1"

// Config is a machine configuration, as the daemon holds it from its
// start. A nil *Config is no configuration: everyone may connect, no
// machine policy, no machine reviewer, the daemon's own limits.
type Config struct {
	// File is the file it was read from, as the errors of callers whose
	// policy it refuses name it.
	File string
	// UIDs and GIDs are who may connect (a caller whose uid is in UIDs,
	// or whose primary or supplementary group is in GIDs). Both empty:
	// everyone. Root always may (see Allows).
	UIDs, GIDs []int
	// Policy is the machine policy (nil when the file has no [policy]).
	Policy *policy.Machine
	// Reviewer is the machine's model reviewer (nil: none); Users are
	// the reviewers of single callers, by uid, each on top of Reviewer.
	Reviewer *Reviewer
	Users    map[int]Reviewer
	// Limits bound each caller (0: the daemon's own default).
	Limits Limits
}

// Limits are the [limits] table: each bounds one caller.
type Limits struct {
	// MaxExecs bounds the commands a caller runs at once.
	MaxExecs int
	// MaxQuestions bounds the questions for a person a caller has
	// waiting.
	MaxQuestions int
	// MaxHeld bounds a caller's attempts held for a client's retry, and
	// MaxHeldBytes the bytes their layers hold together.
	MaxHeld      int
	MaxHeldBytes int64
}

// Reviewer is a model reviewer the operator sets: for a caller it
// applies to, its model, endpoint and key replace the caller's own
// [review] model, base_url and api_key_env (and SANDBOXD_MODEL,
// OPENAI_BASE_URL), so that no caller can send the machine's key to a
// server of its own.
type Reviewer struct {
	Model, BaseURL string
	// KeyFile is where the key was read from; Key is the key. It is
	// sent only as the model endpoint's credential: never in a
	// command's environment, a report, a prompt or a log line.
	KeyFile string
	Key     string `json:"-"`
	// at and line are where the file names KeyFile, for its errors.
	at   string
	line int
}

// String describes r without its key, for any log that prints it.
func (r Reviewer) String() string {
	return fmt.Sprintf("model %q at %s (key from %s)", r.Model, r.BaseURL, r.KeyFile)
}

// LogValue is String, for slog.
func (r Reviewer) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Allows reports whether a caller with these ids may use the daemon.
// Root always may: it can read and change this file, and run sandboxd
// without the daemon, so refusing it would protect nothing and would
// only lock the operator out of `sandboxd serve status`.
func (c *Config) Allows(uid, gid int, groups []int) bool {
	if c == nil || uid == 0 || len(c.UIDs) == 0 && len(c.GIDs) == 0 {
		return true
	}
	if slices.Contains(c.UIDs, uid) || slices.Contains(c.GIDs, gid) {
		return true
	}
	return slices.ContainsFunc(groups, func(g int) bool { return slices.Contains(c.GIDs, g) })
}

// ReviewerFor is the model reviewer the machine sets for uid: its own
// entry on top of the machine's, or the machine's; ok is false when the
// machine sets none for it (the caller's own [review] applies).
func (c *Config) ReviewerFor(uid int) (Reviewer, bool) {
	if c == nil {
		return Reviewer{}, false
	}
	base := Reviewer{}
	if c.Reviewer != nil {
		base = *c.Reviewer
	}
	r, own := c.Users[uid]
	switch {
	case own:
		return over(base, r), true
	case c.Reviewer != nil:
		return base, true
	}
	return Reviewer{}, false
}

// over is r with the fields it leaves empty taken from base, and the
// default endpoint when neither names one.
func over(base, r Reviewer) Reviewer {
	if r.Model == "" {
		r.Model = base.Model
	}
	if r.BaseURL == "" {
		r.BaseURL = base.BaseURL
	}
	if r.KeyFile == "" {
		r.KeyFile, r.Key = base.KeyFile, base.Key
	}
	if r.BaseURL == "" {
		r.BaseURL = OpenAIBaseURL
	}
	return r
}

// IDs resolves the user and group names of a configuration (the
// system's database: os/user; tests give their own).
type IDs interface {
	UserID(name string) (int, error)
	GroupID(name string) (int, error)
}

// file is the configuration file's schema.
type file struct {
	Access struct {
		UIDs   []int64  `toml:"uids"`
		Users  []string `toml:"users"`
		GIDs   []int64  `toml:"gids"`
		Groups []string `toml:"groups"`
	} `toml:"access"`
	// Policy is parsed by policy.ParseTable.
	Policy any `toml:"policy"`
	Review struct {
		Model   string                  `toml:"model"`
		BaseURL string                  `toml:"base_url"`
		KeyFile string                  `toml:"key_file"`
		Users   map[string]reviewerFile `toml:"users"`
	} `toml:"review"`
	Limits struct {
		MaxExecs     *int64 `toml:"max_execs"`
		MaxQuestions *int64 `toml:"max_questions"`
		MaxHeld      *int64 `toml:"max_held"`
		MaxHeldBytes any    `toml:"max_held_bytes"`
	} `toml:"limits"`
}

// reviewerFile is a [review.users.NAME] table.
type reviewerFile struct {
	Model   string `toml:"model"`
	BaseURL string `toml:"base_url"`
	KeyFile string `toml:"key_file"`
}

// perror is an *policy.Error about key of the file, at its line.
func perror(name string, keys policy.KeySet, key, msg string) error {
	return &policy.Error{File: name, Line: keys.Line(key), Key: key, Msg: msg}
}

// userKey resolves a user named in the file: a name, or a decimal uid.
func userKey(ids IDs, s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= math.MaxUint32-1 {
		return n, true
	}
	n, err := ids.UserID(s)
	return n, err == nil
}

// groupKey resolves a group named in the file: a name, or a decimal gid.
func groupKey(ids IDs, s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= math.MaxUint32-1 {
		return n, true
	}
	n, err := ids.GroupID(s)
	return n, err == nil
}
