package audit

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkVerify reads a log of b.N-independent size (20 000 records)
// per iteration; records/s is the figure docs/BENCHMARKS.md reports
// from bench/audit at a million records.
func BenchmarkVerify(b *testing.B) {
	cfg := testConfig(b)
	writeLog(b, cfg, 20000)
	files, _ := Files(cfg.Dir)
	pub, err := ReadPublicKey(filepath.Join(cfg.Dir, PublicKeyName))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var s Summary
	for b.Loop() {
		if s, err = Verify(context.Background(), files, pub); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppend is one writer's Append of a decision event.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, testConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(ctx)
	i := 0
	for b.Loop() {
		if _, err := l.Append(ctx, decision(1000, i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
