package sandbox

import "testing"

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:              "/plain",
		`/with\040space`:      "/with space",
		`/tab\011and\134back`: "/tab\tand\\back",
		`/short\04`:           `/short\04`,
		`/not\999octal`:       `/not\999octal`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}
