package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The writer process: this test binary re-exec'd with the helper's
// environment, appending to the log the parent names (the runc way:
// a real second process, not a goroutine).
const (
	envRole  = "SANDBOXD_AUDIT_TEST_ROLE"
	envDir   = "SANDBOXD_AUDIT_TEST_DIR"
	envKey   = "SANDBOXD_AUDIT_TEST_KEY"
	envID    = "SANDBOXD_AUDIT_TEST_ID"
	envCount = "SANDBOXD_AUDIT_TEST_COUNT"
	envLimit = "SANDBOXD_AUDIT_TEST_FSIZE"
)

// TestHelperWriter is not a test: it is the writer process's body.
func TestHelperWriter(t *testing.T) {
	switch os.Getenv(envRole) {
	case "writer":
		os.Exit(helperWriter())
	case "fsize":
		os.Exit(helperFsize())
	default:
		t.Skip("the writer process, started by other tests")
	}
}

func helperConfig() Config {
	return Config{Dir: os.Getenv(envDir), KeyFile: os.Getenv(envKey), MaxFileBytes: 64 << 10,
		CheckpointEvery: 64, CheckpointAfter: 5 * time.Millisecond}
}

// helperWriter appends count events from 4 goroutines.
func helperWriter() int {
	ctx := context.Background()
	count, _ := strconv.Atoi(os.Getenv(envCount))
	l, err := Open(ctx, helperConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < count; i += 4 {
				ev := decision(1000, i)
				ev.Note = fmt.Sprintf("%s/%d", os.Getenv(envID), i)
				if _, err := l.Append(ctx, ev); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := l.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testBinary is this test binary's path (os.Args[0] may be relative,
// and the helpers run in the log's directory).
func testBinary(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startHelper starts this test binary as a helper with role.
func startHelper(t *testing.T, cfg Config, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testBinary(t), "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Dir = cfg.Dir
	cmd.Env = append([]string{envRole + "=" + role, envDir + "=" + cfg.Dir, envKey + "=" + cfg.KeyFile}, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// TestConcurrentWritersKeepOneChain: 4 processes of 4 goroutines each,
// 500 events a process, and the test's own goroutines, rotating and
// signing meanwhile: one chain, every event in it once.
func TestConcurrentWritersKeepOneChain(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	base := helperConfig()
	cfg.MaxFileBytes, cfg.CheckpointEvery, cfg.CheckpointAfter = base.MaxFileBytes, base.CheckpointEvery, base.CheckpointAfter
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const procs, perProc, mine = 4, 500, 200
	var cmds []*exec.Cmd
	for p := range procs {
		cmds = append(cmds, startHelper(t, cfg, "writer", fmt.Sprintf("%s=p%d", envID, p), fmt.Sprintf("%s=%d", envCount, perProc)))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < mine; i += 4 {
				ev := decision(0, i)
				ev.Note = fmt.Sprintf("parent/%d", i)
				if _, err := l.Append(ctx, ev); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s := mustVerify(t, cfg.Dir)
	files, _ := Files(cfg.Dir)
	seen := map[string]int{}
	err = Scan(ctx, files, func(r Record) error {
		if !r.Kind.own() {
			seen[r.Note]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != procs*perProc+mine {
		t.Fatalf("%d distinct events, want %d", len(seen), procs*perProc+mine)
	}
	for note, n := range seen {
		if n != 1 {
			t.Fatalf("event %s recorded %d times", note, n)
		}
	}
	if s.Files < 3 {
		t.Errorf("no rotation under load: %+v", s)
	}
	t.Logf("%+v", s)
}

// helperFsize appends until the file-size limit makes a write fail, and
// reports how many appends succeeded (stdout) and that the last failed.
func helperFsize() int {
	ctx := context.Background()
	signal.Ignore(syscall.SIGXFSZ) // the failed write is EFBIG, not death
	l, err := Open(ctx, helperConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	limit, _ := strconv.ParseUint(os.Getenv(envLimit), 10, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i := 0; i < 1000; i++ {
		if _, err := l.Append(ctx, decision(1000, i)); err != nil {
			fmt.Printf("appended %d, then: %v\n", i, err)
			if !errors.Is(err, syscall.EFBIG) {
				return 3
			}
			return 0
		}
	}
	return 4
}

// TestFullFileSystemLeavesNoPartialLine: a writer whose write is cut
// short by RLIMIT_FSIZE (a full file system as the process sees it)
// gets an error and leaves the chain whole for the next writer.
func TestFullFileSystemLeavesNoPartialLine(t *testing.T) {
	cfg := testConfig(t)
	writeLog(t, cfg, 3)
	live := filepath.Join(cfg.Dir, LogName)
	st, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	limit := st.Size() + 2000 // a few records, then a write cut short
	cmd := exec.Command(testBinary(t), "-test.run=^TestHelperWriter$", "-test.count=1")
	cmd.Dir = cfg.Dir
	cmd.Env = []string{envRole + "=fsize", envDir + "=" + cfg.Dir, envKey + "=" + cfg.KeyFile, fmt.Sprintf("%s=%d", envLimit, limit)}
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("fsize writer: %v: %s", err, b)
	}
	if !strings.Contains(string(b), "appended ") || strings.Contains(string(b), "appended 0,") {
		t.Fatalf("fsize writer said %q", b)
	}
	t.Logf("fsize writer: %s", b)
	data, _ := os.ReadFile(live)
	if len(data) == 0 || data[len(data)-1] != '\n' || int64(len(data)) > limit {
		t.Fatalf("the live file (%d bytes, limit %d) does not end in a whole line", len(data), limit)
	}
	mustVerify(t, cfg.Dir)
	writeLog(t, cfg, 3)
	mustVerify(t, cfg.Dir)
}
