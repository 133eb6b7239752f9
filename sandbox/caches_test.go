package sandbox

import (
	"slices"
	"testing"
)

func TestCoveredAndMasks(t *testing.T) {
	deny := []string{"/h/.ssh", "/h/.cache/go-build/sub/key", "/h/.cache/go-build/*.pem", "/h/.cache/g*", "/h/.cache/pip/[x"}
	if d, ok := CoveredBy("/h/.ssh/x", deny); !ok || d != "/h/.ssh" {
		t.Errorf("CoveredBy(/h/.ssh/x) = %q, %v", d, ok)
	}
	if d, ok := CoveredBy("/h/.cache/go-build/y", deny); !ok || d != "/h/.cache/g*" {
		t.Errorf("CoveredBy(go-build/y) = %q, %v", d, ok)
	}
	if _, ok := CoveredBy("/h/.cache/pip", deny); ok {
		t.Errorf("CoveredBy(pip) matched")
	}
	got := MasksBelow("/h/.cache/go-build", deny)
	if want := []string{"sub/key", "*.pem"}; !slices.Equal(got, want) {
		t.Errorf("MasksBelow = %q, want %q", got, want)
	}
}
