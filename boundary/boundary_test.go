package boundary

import "testing"

func TestVocabulary(t *testing.T) {
	seen := map[Operation]Surface{}
	for _, s := range []Surface{Filesystem, Network, Command} {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
		for _, op := range Operations(s) {
			if prev, dup := seen[op]; dup {
				t.Errorf("%s is an operation of both %s and %s", op, prev, s)
			}
			seen[op] = s
			if !op.Of(s) {
				t.Errorf("%s not of %s", op, s)
			}
		}
	}
	if Surface("dbus").Valid() || OpRun.Of(Filesystem) || OpConnect.Of(Command) {
		t.Error("vocabulary accepts what it does not define")
	}
}
