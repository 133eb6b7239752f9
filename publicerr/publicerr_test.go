package publicerr

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestPublicSentenceOnly(t *testing.T) {
	internal := fmt.Errorf("sandbox: socketpair: %w", fs.ErrPermission)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Wrap(internal, "the sandbox could not be set up"), "the sandbox could not be set up"},
		{fmt.Errorf("run: %w", Wrap(internal, "the sandbox could not be set up")), "the sandbox could not be set up"},
		{New("workspace / is a system directory"), "workspace / is a system directory"},
		{internal, "fallback"},
	} {
		got := Message(tc.err, "fallback")
		if got != tc.want {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if strings.Contains(got, "socketpair") {
			t.Errorf("the internal cause leaked: %q", got)
		}
	}
	if !errors.Is(Wrap(internal, "x"), fs.ErrPermission) {
		t.Error("the cause is not reachable with errors.Is")
	}
}
