package layer

import (
	"context"
	"fmt"
	"os"
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
			Options{Workspace: ws, StateDir: state, RunID: "bench"}); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
