package machine

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/sandboxd/sandboxd/policy"
)

// Parse decodes a machine configuration's bytes (name is used in its
// errors, each a *policy.Error naming the file, the line and the key).
// User and group names are resolved with ids. The reviewers' key files
// are named, not read (Load reads them).
func Parse(name string, data []byte, ids IDs) (*Config, error) {
	var f file
	keys, err := policy.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	c := &Config{File: name}
	if err := c.access(name, keys, f, ids); err != nil {
		return nil, err
	}
	if f.Policy != nil {
		if err := c.policy(name, data); err != nil {
			return nil, err
		}
	}
	if err := c.reviewers(name, keys, f, ids); err != nil {
		return nil, err
	}
	if err := c.limits(name, keys, f); err != nil {
		return nil, err
	}
	return c, nil
}

// access reads [access].
func (c *Config) access(name string, keys policy.KeySet, f file, ids IDs) error {
	for _, id := range f.Access.UIDs {
		if id < 0 || id >= 1<<32-1 {
			return perror(name, keys, "access.uids", fmt.Sprintf("%d is not a uid", id))
		}
		c.UIDs = append(c.UIDs, int(id))
	}
	for _, id := range f.Access.GIDs {
		if id < 0 || id >= 1<<32-1 {
			return perror(name, keys, "access.gids", fmt.Sprintf("%d is not a gid", id))
		}
		c.GIDs = append(c.GIDs, int(id))
	}
	for _, u := range f.Access.Users {
		id, ok := userKey(ids, u)
		if !ok {
			return perror(name, keys, "access.users", fmt.Sprintf("no user %q on this machine", u))
		}
		c.UIDs = append(c.UIDs, id)
	}
	for _, g := range f.Access.Groups {
		id, ok := groupKey(ids, g)
		if !ok {
			return perror(name, keys, "access.groups", fmt.Sprintf("no group %q on this machine", g))
		}
		c.GIDs = append(c.GIDs, id)
	}
	return nil
}

// policy reads [policy]: a policy file's keys, which may not choose the
// reviewer ([review] does, for the machine).
func (c *Config) policy(name string, data []byte) error {
	p, set, err := policy.ParseTable(name, data, "policy")
	if err != nil {
		return err
	}
	for _, k := range []string{"review.model", "review.base_url", "review.api_key_env"} {
		if set.Has(k) {
			return &policy.Error{File: name, Line: set.Line(k), Key: "policy." + k,
				Msg: "the machine's model reviewer is set in [review] (model, base_url, key_file), not in [policy]"}
		}
	}
	c.Policy = &policy.Machine{Policy: p, Set: set, File: name}
	return nil
}

// reviewers reads [review] and [review.users.NAME].
func (c *Config) reviewers(name string, keys policy.KeySet, f file, ids IDs) error {
	machine := reviewerFile{Model: f.Review.Model, BaseURL: f.Review.BaseURL, KeyFile: f.Review.KeyFile}
	if err := checkReviewer(name, keys, "review", machine); err != nil {
		return err
	}
	if machine != (reviewerFile{}) {
		if machine.Model == "" {
			return perror(name, keys, "review", "a machine reviewer needs a model")
		}
		c.Reviewer = &Reviewer{Model: machine.Model, BaseURL: machine.BaseURL, KeyFile: machine.KeyFile,
			at: "review.key_file", line: keys.Line("review.key_file")}
	}
	names := make([]string, 0, len(f.Review.Users))
	for n := range f.Review.Users {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r, table := f.Review.Users[n], "review.users."+quoteKey(n)
		uid, ok := userKey(ids, n)
		if !ok {
			return perror(name, keys, table, fmt.Sprintf("no user %q on this machine", n))
		}
		if _, dup := c.Users[uid]; dup {
			return perror(name, keys, table, fmt.Sprintf("uid %d has another [review.users] table", uid))
		}
		if err := checkReviewer(name, keys, table, r); err != nil {
			return err
		}
		if r.Model == "" && machine.Model == "" {
			return perror(name, keys, table, "a reviewer needs a model (here or in [review])")
		}
		if c.Users == nil {
			c.Users = map[int]Reviewer{}
		}
		c.Users[uid] = Reviewer{Model: r.Model, BaseURL: r.BaseURL, KeyFile: r.KeyFile,
			at: table + ".key_file", line: keys.Line(table + ".key_file")}
	}
	return nil
}

// checkReviewer checks one reviewer table's keys.
func checkReviewer(name string, keys policy.KeySet, table string, r reviewerFile) error {
	if msg := policy.CheckModelName(r.Model); msg != "" {
		return perror(name, keys, table+".model", msg)
	}
	if msg := policy.CheckBaseURL(r.BaseURL); msg != "" {
		return perror(name, keys, table+".base_url", msg)
	}
	if r.KeyFile != "" && !filepath.IsAbs(r.KeyFile) {
		return perror(name, keys, table+".key_file", fmt.Sprintf("%q is not an absolute path", r.KeyFile))
	}
	return nil
}

// limits reads [limits].
func (c *Config) limits(name string, keys policy.KeySet, f file) error {
	count := func(key string, v *int64, max int64, dst *int) error {
		if v == nil {
			return nil
		}
		if *v < 1 || *v > max {
			return perror(name, keys, key, fmt.Sprintf("must be between 1 and %d (got %d)", max, *v))
		}
		*dst = int(*v)
		return nil
	}
	l := f.Limits
	if err := count("limits.max_execs", l.MaxExecs, 4096, &c.Limits.MaxExecs); err != nil {
		return err
	}
	if err := count("limits.max_questions", l.MaxQuestions, 1024, &c.Limits.MaxQuestions); err != nil {
		return err
	}
	if err := count("limits.max_held", l.MaxHeld, 1024, &c.Limits.MaxHeld); err != nil {
		return err
	}
	var size policy.Size
	switch v := l.MaxHeldBytes.(type) {
	case nil:
		return nil
	case int64:
		size = policy.Size(v)
	case string:
		s, err := policy.ParseSize(v)
		if err != nil {
			return perror(name, keys, "limits.max_held_bytes", fmt.Sprintf("invalid size %q (want a size such as \"1GiB\")", v))
		}
		size = s
	default:
		return perror(name, keys, "limits.max_held_bytes", `expected a size string such as "1GiB" or an integer`)
	}
	if size < policy.MiB {
		return perror(name, keys, "limits.max_held_bytes", fmt.Sprintf("must be at least 1MiB (got %s)", size))
	}
	c.Limits.MaxHeldBytes = int64(size)
	return nil
}

// quoteKey is a key part as a dotted key spells it (policy's rule:
// quoted unless bare).
func quoteKey(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("%q", s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
