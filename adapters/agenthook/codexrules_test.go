package agenthook

import (
	"reflect"
	"testing"
)

// TestCommands: the commands a rule judges, for scripts Codex reads
// itself (plain words and operators: the same commands it matches) and
// for scripts it does not (where this finds the command it hides).
func TestCommands(t *testing.T) {
	for _, c := range []struct {
		script string
		want   [][]string
	}{
		{"touch x", [][]string{{"touch", "x"}}},
		{"true && touch a1", [][]string{{"true"}, {"touch", "a1"}}},
		{"touch a9 | cat; ls -l || git push origin main", [][]string{{"touch", "a9"}, {"cat"}, {"ls", "-l"}, {"git", "push", "origin", "main"}}},
		{"git commit -m 'a b; c' && echo \"x y\"", [][]string{{"git", "commit", "-m", "a b; c"}, {"echo", "x y"}}},
		// Beyond what Codex reads: the command is still found.
		{"touch a2 > /dev/null", [][]string{{"touch", "a2"}}},
		{"FOO=1 BAR=x touch a4", [][]string{{"touch", "a4"}}},
		{"(touch a5)", [][]string{{"touch", "a5"}}},
		{"echo $(touch a3)", [][]string{{"echo"}, {"touch", "a3"}}},
		{"echo `touch a3`", [][]string{{"echo"}, {"touch", "a3"}}},
		{"rm -rf *.o && make", [][]string{{"rm", "-rf"}, {"make"}}},
		{"echo \"$HOME\" x", [][]string{{"echo"}}},
		{"cd sub\ngit push # push it\nls", [][]string{{"cd", "sub"}, {"git", "push"}, {"ls"}}},
		{"sleep 1 & touch b", [][]string{{"sleep", "1"}, {"touch", "b"}}},
		{`to\uch x`, [][]string{{"touch", "x"}}},
		{"echo 'unterminated", [][]string{{"echo"}}},
		{"", nil},
	} {
		if got := Commands(c.script); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.script, got, c.want)
		}
	}
}

func FuzzCommands(f *testing.F) {
	f.Add("FOO=1 touch a && (git push) | cat $(x) 'y' \"z\" # c")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range Commands(s) {
			if len(c) == 0 {
				t.Fatalf("%q: an empty command", s)
			}
		}
	})
}
