package mcp

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDecodeArgs(t *testing.T) {
	max := time.Hour
	for _, tc := range []struct {
		name, in string
		want     Args
		err      string
	}{
		{"command only", `{"command":"ls -la"}`, Args{Command: "ls -la"}, ""},
		{"all", `{"command":"make","cwd":"sub","intent":"build it","timeout":90}`, Args{Command: "make", Cwd: "sub", Intent: "build it", Timeout: 90 * time.Second}, ""},
		{"fraction", `{"command":"x","timeout":0.5}`, Args{Command: "x", Timeout: 500 * time.Millisecond}, ""},
		{"nulls", `{"command":"x","cwd":null,"intent":null,"timeout":null}`, Args{Command: "x"}, ""},
		{"whitespace", " \n{ \"command\" : \"x\" }\n ", Args{Command: "x"}, ""},
		{"empty object", `{}`, Args{}, "command is required"},
		{"blank command", `{"command":"  \n"}`, Args{}, "command is required"},
		{"null command", `{"command":null}`, Args{}, "command must be a string"},
		{"number command", `{"command":12}`, Args{}, "command must be a string"},
		{"array", `["ls"]`, Args{}, "one JSON object"},
		{"string", `"ls"`, Args{}, "one JSON object"},
		{"null", `null`, Args{}, "one JSON object"},
		{"empty", ``, Args{}, "one JSON object"},
		{"trailing", `{"command":"x"}{"command":"y"}`, Args{}, "one JSON object"},
		{"trailing junk", `{"command":"x"} x`, Args{}, "one JSON object"},
		{"unterminated", `{"command":"x"`, Args{}, "one JSON object"},
		{"duplicate", `{"command":"ls","command":"rm -rf ~"}`, Args{}, "given twice"},
		{"case variant", `{"command":"ls","Command":"rm -rf ~"}`, Args{}, "unknown argument"},
		{"unknown", `{"command":"ls","sudo":true}`, Args{}, "unknown argument"},
		{"nul", `{"command":"ls\u0000rm"}`, Args{}, "NUL"},
		{"cwd number", `{"command":"x","cwd":1}`, Args{}, "cwd must be a string"},
		{"timeout string", `{"command":"x","timeout":"90"}`, Args{}, "number of seconds"},
		{"timeout zero", `{"command":"x","timeout":0}`, Args{}, "positive"},
		{"timeout negative", `{"command":"x","timeout":-1}`, Args{}, "positive"},
		{"timeout over", `{"command":"x","timeout":3601}`, Args{}, "at most 3600"},
		{"timeout huge", `{"command":"x","timeout":1e400}`, Args{}, "number of seconds"},
		{"timeout tiny", `{"command":"x","timeout":1e-9}`, Args{}, "at least"},
		{"invalid utf8", "{\"command\":\"\xff\"}", Args{}, "UTF-8"},
		{"long command", `{"command":"` + strings.Repeat("a", MaxCommand+1) + `"}`, Args{}, "over 100 KiB"},
		{"long intent", `{"command":"x","intent":"` + strings.Repeat("a", MaxIntent+1) + `"}`, Args{}, "intent is over"},
		{"long args", `{"command":"x","intent":"` + strings.Repeat("a", MaxArgs) + `"}`, Args{}, "arguments are over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeArgs([]byte(tc.in), max)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DecodeArgs = %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("DecodeArgs = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// Whatever a client sends, a decoded call is within every bound, and
// an error is a short sentence.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"command":"make","cwd":"sub","intent":"x","timeout":90}`,
		`{"command":"a","command":"b"}`, `{"command":null}`, `[1]`, `{"timeout":1e999,"command":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := DecodeArgs(in, time.Hour)
		if err != nil {
			if a != (Args{}) || len(err.Error()) > 200 || !utf8.ValidString(err.Error()) {
				t.Fatalf("error %q with %+v", err, a)
			}
			return
		}
		switch {
		case strings.TrimSpace(a.Command) == "", len(a.Command) > MaxCommand, len(a.Cwd) > MaxCwd, len(a.Intent) > MaxIntent,
			a.Timeout < 0, a.Timeout > time.Hour, strings.ContainsRune(a.Command+a.Cwd+a.Intent, 0):
			t.Fatalf("out of bounds: %+v", a)
		}
	})
}
