package runcmd

import (
	"io"
	"strings"
	"testing"
)

func TestParseRunFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		argv    []string
		wantErr string
	}{
		{[]string{"--", "true"}, []string{"true"}, ""},
		{[]string{"-c", "echo hi"}, []string{"bash", "-c", "echo hi"}, ""},
		{[]string{"--timeout", "2s", "--", "sleep", "1"}, []string{"sleep", "1"}, ""},
		{[]string{}, nil, "no command"},
		{[]string{"-c", "x", "--", "y"}, nil, "not both"},
		{[]string{"-c", "x", "y"}, nil, `extra argument "y" after -c`},
		{[]string{"-c", "x", "y", "--", "z"}, nil, `extra arguments "y" "--" "z" after -c`},
		{[]string{"-c"}, nil, "flag needs an argument: -c"},
		{[]string{"-c", "--", "x"}, nil, `-c takes the shell command as its value, not "--"`},
		{[]string{"-c", ""}, nil, "-c needs a shell command"},
		{[]string{"--"}, nil, "no command after --"},
		{[]string{"-v", "--"}, nil, "no command after --"},
		{[]string{"-c", "x", "--"}, []string{"bash", "-c", "x"}, ""},
		// A "--" that is a flag's value ends nothing.
		{[]string{"--intent", "--", "x"}, []string{"x"}, ""},
		{[]string{"--intent", "--", "-c", "x"}, []string{"bash", "-c", "x"}, ""},
		{[]string{"--workspace", "--", "--", "x"}, []string{"x"}, ""},
		{[]string{"--workspace", "--"}, nil, "no command:"},
		// Without -c or --, the first argument that is not a flag is the command.
		{[]string{"-v", "x", "-c", "y"}, []string{"x", "-c", "y"}, ""},
		{[]string{"--reviewer", "magic", "--", "true"}, nil, "--reviewer"},
		{[]string{"--retries", "-1", "--", "true"}, nil, "--retries"},
		{[]string{"--detect", "sometimes", "--", "true"}, nil, "--detect"},
		{[]string{"--detect", "off", "--", "true"}, []string{"true"}, ""},
		{[]string{"--timeout", "-1s", "--", "true"}, nil, "--timeout"},
		{[]string{"--frobnicate", "--", "true"}, nil, "frobnicate"},
	} {
		_, argv, err := parseRunFlags(tc.args, io.Discard)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want one mentioning %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(argv, "\x00") != strings.Join(tc.argv, "\x00") {
			t.Errorf("%q: argv %q, err %v; want %q", tc.args, argv, err, tc.argv)
		}
	}
}
