package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCacheMmapWrite: a policy file changed through a shared writable
// mapping is seen on the next load. Such a write changes no time the
// cache compares once the mapped page is dirty (on tmpfs, ever: shmem
// has no page_mkwrite and no writeback; elsewhere until writeback), so
// size, mtime and ctime stay as they were.
func TestCacheMmapWrite(t *testing.T) {
	t.Parallel()
	dirs := map[string]string{"disk": t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "policy-cache-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(shm) })
		dirs["tmpfs"] = shm
	}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := NewCache()
			user := writeFile(t, filepath.Join(dir, "user.toml"), pidsPolicy(1001))
			f, err := os.OpenFile(user, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := unix.Mmap(int(f.Fd()), 0, len(pidsPolicy(1001)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(m)
			copy(m, pidsPolicy(1002)) // the page is dirty and writable from here on
			settle()
			if got := loadPids(t, c, 0, user); got != 1002 {
				t.Fatalf("pids %d, want 1002", got)
			}
			copy(m, pidsPolicy(1003))
			data, _ := os.ReadFile(user)
			if got := loadPids(t, c, 0, user); got != 1003 {
				t.Fatalf("the file now reads %q; the cache gave pids %d, want 1003", data, got)
			}
		})
	}
}

// TestCacheNoAlias: a Policy a Cache returned shares nothing with what
// it keeps: every slice of it overwritten, the next load is as the file.
func TestCacheNoAlias(t *testing.T) {
	t.Parallel()
	c := NewCache()
	dir := t.TempDir()
	user := writeFile(t, filepath.Join(dir, "user.toml"), "[filesystem]\nwritable = [\"/tmp/a\", \"/tmp/b\"]\nsecrets = [\"~/.s1\"]\n[env]\ndeny = [\"FOO_*\"]\n")
	settle()
	want, err := c.Load(0, nil, user, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		p, err := c.Load(0, nil, user, true)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("load %d after mutating: %+v, want %+v", i, p, want)
		}
		scribble(reflect.ValueOf(&p).Elem())
	}
	if n, _ := c.files.Len(); n != 1 {
		t.Fatalf("not kept (%d entries)", n)
	}
}

// scribble overwrites every string reachable through v's slices.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if v.Index(i).Kind() == reflect.String {
				v.Index(i).SetString("/scribbled")
			} else {
				scribble(v.Index(i))
			}
		}
	}
}
