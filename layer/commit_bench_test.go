package layer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCommitSmallFiles commits a layer of 2 000 new 100-byte files
// (no sandbox involved: the layer is a plain directory).
func BenchmarkCommitSmallFiles(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		shm, _ := os.MkdirTemp("/dev/shm", "bench-")
		defer os.RemoveAll(shm)
		upper, ws, state := filepath.Join(shm, "upper"), filepath.Join(dir, "ws"), filepath.Join(dir, "state")
		os.MkdirAll(filepath.Join(upper, "out"), 0o755)
		os.MkdirAll(ws, 0o755)
		for j := 0; j < 2000; j++ {
			os.WriteFile(filepath.Join(upper, "out", fmt.Sprintf("f%d", j)), make([]byte, 100), 0o644)
		}
		f, _ := os.Open(upper)
		b.StartTimer()
		if _, err := Commit(context.Background(), Source{Upper: f, Started: time.Now(), HostUID: -1, HostGID: -1},
			Options{Workspace: ws, StateDir: state, RunID: "bench", Caller: testCaller()}); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkCommitGitCommit commits what `git add && git commit` of 200 new
// files leaves in a layer over a repository of 2 000 tracked files: the
// persistence rules, the repository's history check included.
func BenchmarkCommitGitCommit(b *testing.B) {
	dir := b.TempDir()
	base := filepath.Join(dir, "base")
	git := func(d string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = d
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b",
			"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b"}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(base, 0o755)
	git(base, "init", "-q")
	for j := 0; j < 2000; j++ {
		p := filepath.Join(base, "src", fmt.Sprint(j%40), fmt.Sprintf("f%d.go", j))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("package x // %d\n", j)), 0o644)
	}
	git(base, "add", "-A")
	git(base, "commit", "-q", "-m", "base")
	// The attempt, done on a copy; what differs from the base is the layer.
	after := filepath.Join(dir, "after")
	if out, err := exec.Command("cp", "-a", base, after).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v %s", err, out)
	}
	for j := 0; j < 200; j++ {
		os.MkdirAll(filepath.Join(after, "out"), 0o755)
		os.WriteFile(filepath.Join(after, "out", fmt.Sprintf("n%d", j)), []byte(fmt.Sprint(j)), 0o644)
	}
	git(after, "add", "-A")
	git(after, "commit", "-q", "-m", "new")
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ws, state := filepath.Join(dir, fmt.Sprint("ws", i)), filepath.Join(dir, fmt.Sprint("state", i))
		exec.Command("cp", "-a", base, ws).Run()
		shm, _ := os.MkdirTemp("/dev/shm", "bench-")
		upper := filepath.Join(shm, "upper")
		filepath.WalkDir(after, func(p string, d os.DirEntry, err error) error {
			rel, _ := filepath.Rel(after, p)
			if err != nil || rel == "." {
				return nil
			}
			old, oerr := os.ReadFile(filepath.Join(base, rel))
			if d.IsDir() {
				if _, err := os.Stat(filepath.Join(base, rel)); err != nil {
					os.MkdirAll(filepath.Join(upper, rel), 0o755)
				}
				return nil
			}
			now, _ := os.ReadFile(p)
			if oerr != nil || string(old) != string(now) {
				os.MkdirAll(filepath.Join(upper, filepath.Dir(rel)), 0o755)
				os.WriteFile(filepath.Join(upper, rel), now, 0o644)
			}
			return nil
		})
		f, _ := os.Open(upper)
		b.StartTimer()
		if _, err := Commit(context.Background(), Source{Upper: f, Started: time.Now(), HostUID: -1, HostGID: -1},
			Options{Workspace: ws, StateDir: state, RunID: "bench", Caller: testCaller()}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		f.Close()
		os.RemoveAll(shm)
		os.RemoveAll(ws)
		b.StartTimer()
	}
}

// benchDir is where the many-file benchmarks put the workspace and the
// state directory: under SANDBOXD_BENCH_DIR (a directory on the disk to
// measure), left there for the caller to delete, else the test's
// temporary directory. Nothing is deleted while benchmarks run: ext4
// without a journal makes every creation scan past the inodes freed in
// the last minute, which would make each benchmark slow down the next.
func benchDir(b *testing.B) string {
	if d := os.Getenv("SANDBOXD_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "layer-bench-")
		if err != nil {
			b.Fatal(err)
		}
		return dir
	}
	return b.TempDir()
}

const manyFiles = 30000

// BenchmarkCommitManyFiles commits a layer of 30 000 new 100-byte files in
// one directory: new (the workspace does not have it) or existing (it
// does, empty).
func BenchmarkCommitManyFiles(b *testing.B) {
	for _, existing := range []bool{false, true} {
		name := "new"
		if existing {
			name = "existing"
		}
		b.Run(name, func(b *testing.B) { commitManyFiles(b, existing) })
	}
}

func commitManyFiles(b *testing.B, existing bool) {
	dir := benchDir(b)
	shm, err := os.MkdirTemp("/dev/shm", "bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(shm)
	upper := filepath.Join(shm, "upper")
	os.MkdirAll(filepath.Join(upper, "out"), 0o755)
	for j := 0; j < manyFiles; j++ {
		os.WriteFile(filepath.Join(upper, "out", fmt.Sprintf("f%d", j)), make([]byte, 100), 0o644)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ws, state := filepath.Join(dir, fmt.Sprint("ws", i)), filepath.Join(dir, fmt.Sprint("state", i))
		os.MkdirAll(ws, 0o755)
		if existing {
			os.MkdirAll(filepath.Join(ws, "out"), 0o755)
		}
		f, _ := os.Open(upper)
		exec.Command("sync").Run()
		b.StartTimer()
		if _, err := Commit(context.Background(), Source{Upper: f, Started: time.Now(), HostUID: -1, HostGID: -1},
			Options{Workspace: ws, StateDir: state, RunID: "bench", Caller: testCaller()}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		f.Close()
	}
}

// BenchmarkCreateManyFiles is BenchmarkCommitManyFiles's reference: the
// same 30 000 files written straight into the workspace (open, write,
// close), as the command would without a layer.
func BenchmarkCreateManyFiles(b *testing.B) {
	dir := benchDir(b)
	data := make([]byte, 100)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		out := filepath.Join(dir, fmt.Sprint("ws", i), "out")
		exec.Command("sync").Run()
		b.StartTimer()
		if err := os.MkdirAll(out, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < manyFiles; j++ {
			if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("f%d", j)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}
