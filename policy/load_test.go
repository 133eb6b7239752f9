package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.toml")

	t.Run("defaults when the default user file is missing", func(t *testing.T) {
		p, err := Load(missing, false, filepath.Join(dir, "nows.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, Default()) {
			t.Errorf("got %+v", p)
		}
	})

	t.Run("explicit user file must exist", func(t *testing.T) {
		_, err := Load(missing, true, "")
		var pe *Error
		if !errors.As(err, &pe) || pe.File != missing || pe.Line != 0 || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("got %v", err)
		}
		if want := missing + ": cannot read policy file (no such file or directory)"; err.Error() != want {
			t.Errorf("got %q, want %q", err, want)
		}
	})

	t.Run("unreadable user file", func(t *testing.T) {
		_, err := Load(dir, false, "") // a directory
		var pe *Error
		if !errors.As(err, &pe) || pe.File != dir || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("got %v", err)
		}
	})

	user := writeFile(t, filepath.Join(dir, "user.toml"), "[filesystem]\nwritable = [\"/data\", \"/cache\"]\n[limits]\npids = 1000\n")

	t.Run("user only", func(t *testing.T) {
		p, err := Load(user, true, "")
		if err != nil {
			t.Fatal(err)
		}
		if p.Limits.Pids != 1000 || len(p.Filesystem.Writable) != 2 || p.Limits.Memory != 8*GiB {
			t.Errorf("got %+v", p)
		}
	})

	t.Run("workspace tightens", func(t *testing.T) {
		ws := writeFile(t, filepath.Join(dir, "ws1.toml"), "profile = \"strict\"\n[filesystem]\nwritable = [\"/cache\"]\nsecrets = [\"~/.myapp\"]\n[limits]\npids = 100\n")
		p, err := Load(user, true, ws)
		if err != nil {
			t.Fatal(err)
		}
		want := Default()
		want.Profile = "strict"
		want.Filesystem.Writable = []string{"/cache"}
		want.Filesystem.Secrets = []string{"~/.myapp"}
		want.Limits.Pids = 100
		if !reflect.DeepEqual(p, want) {
			t.Errorf("got  %+v\nwant %+v", p, want)
		}
	})

	t.Run("workspace cannot loosen", func(t *testing.T) {
		ws := writeFile(t, filepath.Join(dir, "ws2.toml"), "# raise\n[limits]\npids = 2000\n")
		_, err := Load(user, true, ws)
		want := ws + ":3: limits.pids: workspace policy may only tighten: raises limits.pids from 1000 to 2000"
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	})

	t.Run("nested workspace files tighten in turn", func(t *testing.T) {
		outer := writeFile(t, filepath.Join(dir, "nest1.toml"), "[limits]\npids = 500\n")
		inner := writeFile(t, filepath.Join(dir, "nest2.toml"), "[limits]\npids = 200\n")
		p, err := Load(user, true, outer, filepath.Join(dir, "missing.toml"), inner)
		if err != nil || p.Limits.Pids != 200 {
			t.Fatalf("got %d, %v", p.Limits.Pids, err)
		}
		loosen := writeFile(t, filepath.Join(dir, "nest3.toml"), "[limits]\npids = 800\n")
		if _, err := Load(user, true, outer, loosen); err == nil || !strings.Contains(err.Error(), "raises limits.pids from 500 to 800") {
			t.Errorf("an inner file raising an outer one's limit: %v", err)
		}
	})

	t.Run("no_transaction is the user's own", func(t *testing.T) {
		u := writeFile(t, filepath.Join(dir, "user-nt.toml"), "[transaction]\nno_transaction = [\"npm run dev*\", \"vite\"]\n")
		p, err := Load(u, true, "")
		if err != nil || len(p.Transaction.NoTransaction) != 2 {
			t.Fatalf("got %+v, %v", p.Transaction, err)
		}
		ws := writeFile(t, filepath.Join(dir, "ws-nt.toml"), "[transaction]\nno_transaction = [\"make\"]\n")
		if _, err := Load(u, true, ws); err == nil || !strings.Contains(err.Error(), "only your own policy may set transaction.no_transaction") {
			t.Errorf("workspace set no_transaction: %v", err)
		}
		for _, bad := range []string{`""`, `"*"`, `"* *"`, "\"a\\u0007b\""} {
			f := writeFile(t, filepath.Join(dir, "bad-nt.toml"), "[transaction]\nno_transaction = ["+bad+"]\n")
			if _, err := Load(f, true, ""); err == nil {
				t.Errorf("no_transaction = [%s] was accepted", bad)
			}
		}
	})

	t.Run("workspace parse error", func(t *testing.T) {
		ws := writeFile(t, filepath.Join(dir, "ws3.toml"), "[limits]\nbogus = 1\n")
		_, err := Load(user, true, ws)
		if err == nil || !strings.HasPrefix(err.Error(), ws+":2: limits.bogus: unknown key") {
			t.Errorf("got %v", err)
		}
	})

	t.Run("workspace symlink refused", func(t *testing.T) {
		target := writeFile(t, filepath.Join(dir, "target.toml"), "profile = \"strict\"\n")
		link := filepath.Join(dir, "link.toml")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_, err := Load(user, true, link)
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("got %v", err)
		}
	})

	t.Run("workspace hard link refused", func(t *testing.T) {
		target := writeFile(t, filepath.Join(dir, "hl-target.toml"), "profile = \"strict\"\n")
		link := filepath.Join(dir, "hl.toml")
		if err := os.Link(target, link); err != nil {
			t.Skip(err)
		}
		_, err := Load(user, true, link)
		if err == nil || !strings.Contains(err.Error(), "hard links") {
			t.Errorf("got %v", err)
		}
	})

	t.Run("workspace directory refused", func(t *testing.T) {
		wsDir := filepath.Join(dir, "wsdir")
		if err := os.Mkdir(wsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Load(user, true, wsDir)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("got %v", err)
		}
	})

	t.Run("too large", func(t *testing.T) {
		big := writeFile(t, filepath.Join(dir, "big.toml"), strings.Repeat("#\n", maxFileSize))
		_, err := Load(big, true, "")
		if err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("got %v", err)
		}
	})
}
