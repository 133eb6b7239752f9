package main

import (
	"bytes"
	"context"
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

// run's own failures are one line on stderr and exit 125.
func TestRunBadInput(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"run", "--frob", "--", "true"}, {"run", "--workspace", "/", "--", "true"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), args, func(k string) string {
			if k == "HOME" {
				return t.TempDir()
			}
			return ""
		}, strings.NewReader(""), io.Discard, &stderr, nil)
		if code != exitSandboxd {
			t.Errorf("%q: exit %d, want %d", args, code, exitSandboxd)
		}
		if strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: stderr %q is not one line", args, stderr.String())
		}
	}
}
