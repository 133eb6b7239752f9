package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without the private key, a record emptied to a bare link (a view's
// stub) in a log's own file, and an unsigned retention record that
// "accounts" for the oldest files removed, are refused.
func TestForgeriesWithoutTheKey(t *testing.T) {
	ctx := context.Background()
	newLog := func(t *testing.T) (Config, []string) {
		cfg := testConfig(t)
		cfg.MaxFileBytes = 16 << 10
		writeLog(t, cfg, 100)
		files, err := Files(cfg.Dir)
		if err != nil || len(files) < 3 {
			t.Fatalf("files %v %v", files, err)
		}
		return cfg, files
	}
	pubOf := func(t *testing.T, cfg Config) []byte {
		pub, err := ReadPublicKey(filepath.Join(cfg.Dir, PublicKeyName))
		if err != nil {
			t.Fatal(err)
		}
		return pub
	}
	t.Run("a record replaced by a stub", func(t *testing.T) {
		cfg, files := newLog(t)
		lines := readLines(t, files[1])
		i := ordinary(t, lines, 0)
		r, err := parseRecord(lines[i])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(lines[i])
		stub, _ := encodeLine(&Record{Seq: r.Seq, Prev: r.Prev, Hash: hex.EncodeToString(sum[:])})
		lines[i] = stub
		writeLines(t, files[1], lines)
		_, err = Verify(ctx, files, pubOf(t, cfg))
		if err == nil || !strings.Contains(err.Error(), "only a view may hold one") {
			t.Fatalf("a record emptied to a stub verified: %v", err)
		}
	})
	t.Run("an unsigned retention record", func(t *testing.T) {
		cfg, files := newLog(t)
		first := readLines(t, files[0])
		lastOfFirst := first[len(first)-1]
		lr, _ := parseRecord(lastOfFirst)
		h := sha256.Sum256(lastOfFirst)
		live := files[len(files)-1]
		lines := readLines(t, live)
		tail := lines[len(lines)-1]
		tr, _ := parseRecord(tail)
		th := sha256.Sum256(tail)
		forged, err := encodeLine(&Record{Seq: tr.Seq + 1, Prev: hex.EncodeToString(th[:]), Time: tr.Time,
			Event: Event{Kind: KindRetention}, Retention: &Retention{Chain: genesisChain(t, files), Files: []string{filepath.Base(files[0])},
				FirstSeq: 0, LastSeq: lr.Seq, LastHash: hex.EncodeToString(h[:])}})
		if err != nil {
			t.Fatal(err)
		}
		writeLines(t, live, append(lines, forged))
		os.Remove(files[0])
		_, err = Verify(ctx, files[1:], pubOf(t, cfg))
		if err == nil || !strings.Contains(err.Error(), "is not signed by a checkpoint after it") {
			t.Fatalf("an unsigned retention record accounted for a removed file: %v", err)
		}
	})
}

// genesisChain is the chain id a set's genesis names.
func genesisChain(t *testing.T, files []string) string {
	t.Helper()
	r, err := parseRecord(bytes.SplitN(mustRead(t, files[0]), []byte("\n"), 2)[0])
	if err != nil || r.Genesis == nil {
		t.Fatalf("no genesis: %v", err)
	}
	return r.Genesis.Chain
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
