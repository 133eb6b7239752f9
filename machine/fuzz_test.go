package machine

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// FuzzParse: whatever the bytes, Parse answers a configuration or a
// *policy.Error naming the file (the file is root's, but an operator's
// typo must never crash the daemon or lose its position).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"[access]\nusers = [\"alice\"]\ngroups = [\"dev\"]\n[policy.limits]\npids = 64\n",
		"[review]\nmodel = \"m\"\n[review.users.alice]\nkey_file = \"/k\"\n[review.users.\"1002\"]\nmodel = \"n\"\n",
		"[limits]\nmax_execs = 2\nmax_held_bytes = \"1GiB\"\n",
		"policy = 3\n",
		"review.users = { alice = { model = \"m\" } }\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.toml", data, fakeIDs{})
		if err != nil {
			var pe *policy.Error
			if !errors.As(err, &pe) || pe.File != "fuzz.toml" {
				t.Fatalf("error %T without the file: %v", err, err)
			}
			return
		}
		for uid := range c.Users {
			if r, ok := c.ReviewerFor(uid); !ok || r.Model == "" || r.BaseURL == "" {
				t.Fatalf("uid %d: a reviewer without a model or endpoint: %+v", uid, r)
			}
		}
	})
}
