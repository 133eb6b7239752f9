package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox"
)

// refuses is an attempt that exits with code after calls refused by
// design, and denials.
func refuses(code int, refused []sandbox.Refused, ds ...sandbox.Denial) attemptFunc {
	return func(ctx context.Context, spec sandbox.Spec, during During) (sandbox.Result, error) {
		res, err := denies(code, ds...)(ctx, spec, during)
		res.Refused = refused
		return res, err
	}
}

// Calls refused by design are no boundaries: the report lists them by
// class, counted over the attempts; a failed run is told each class
// once, after its last attempt, and a run that succeeded is told only
// the classes programs do not probe routinely (not netlink).
func TestRefusedByDesign(t *testing.T) {
	netlink := func(n int) sandbox.Refused {
		return sandbox.Refused{Class: "netlink", What: "a netlink socket", Why: "closed", Count: n, Probed: true}
	}
	ns := sandbox.Refused{Class: "namespace", What: "a new namespace", Why: "nested", Count: 1}
	for _, tc := range []struct {
		name   string
		script func(w world) []attemptFunc
		want   string // the report's refused
		kinds  []Kind
		told   []string
	}{
		{
			name: "failed, retried once",
			script: func(w world) []attemptFunc {
				return []attemptFunc{
					refuses(1, []sandbox.Refused{netlink(2), ns}, fsDenial("make_reg", w.allowed)),
					refuses(1, []sandbox.Refused{netlink(1)}),
				}
			},
			want:  "netlink=3 namespace=1",
			kinds: []Kind{KindBoundary, KindReviewed, KindRetrying, KindRefused, KindRefused},
			told:  []string{"netlink", "namespace"},
		},
		{
			name:   "succeeded",
			script: func(world) []attemptFunc { return []attemptFunc{refuses(0, []sandbox.Refused{netlink(1)})} },
			want:   "netlink=1",
		},
		{
			name:   "succeeded after a namespace was refused",
			script: func(world) []attemptFunc { return []attemptFunc{refuses(0, []sandbox.Refused{netlink(1), ns})} },
			want:   "netlink=1 namespace=1",
			kinds:  []Kind{KindRefused},
			told:   []string{"namespace"},
		},
		{
			name:   "nothing refused",
			script: func(world) []attemptFunc { return []attemptFunc{refuses(2, nil)} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			ev := &recorder{}
			rep, err := New(Config{Sandbox: &fakeSandbox{script: tc.script(w)}}).Run(context.Background(), w.caller, job(1), ev)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rep.Refused {
				got = append(got, fmt.Sprintf("%s=%d", r.Class, r.Count))
			}
			if fmt.Sprint(got) != fmt.Sprint(strings.Fields(tc.want)) {
				t.Errorf("refused %v, want %s", got, tc.want)
			}
			for _, b := range rep.Boundaries {
				if b.Operation != "make_reg" {
					t.Errorf("boundary %+v", b)
				}
			}
			if kinds := ev.kinds(); !slices.Equal(kinds, tc.kinds) {
				t.Errorf("events %q, want %q", kinds, tc.kinds)
			}
			var told []string
			for _, e := range ev.events {
				if e.Kind == KindRefused {
					told = append(told, e.Refused.Class)
				}
			}
			if !slices.Equal(told, tc.told) {
				t.Errorf("told %q", told)
			}
		})
	}
}
