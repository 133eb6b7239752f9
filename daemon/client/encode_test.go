package client

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// filled is req with every field set (each string to s, each number to
// n, each bool true), found by reflection: a field added to the wire's
// type that appendExecRequest leaves out fails the tests below.
func filled(s string, n int64) ExecRequest {
	var req ExecRequest
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Struct:
				fill(f)
			case reflect.String:
				f.SetString(s)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Int, reflect.Int64:
				f.SetInt(n)
			case reflect.Uint32:
				f.SetUint(uint64(n))
			case reflect.Slice:
				f.Set(reflect.ValueOf([]string{s, "", s}))
			default:
				panic("filled: a field of kind " + f.Kind().String())
			}
		}
	}
	fill(reflect.ValueOf(&req).Elem())
	return req
}

// The request is written as json.Marshal writes it, byte for byte.
func TestAppendExecRequest(t *testing.T) {
	for _, req := range []ExecRequest{
		{},
		{Argv: []string{}, Context: Context{Env: []string{}}},
		{Argv: []string{"sh", "-c", "echo \"hi\" <&> \\ \t\n"}, Context: Context{Env: []string{"A=b", "HOME=/home/x"}, Cwd: "/w", Umask: 0o22, Workspace: "/w"}, Retries: 2, Text: true, Stdin: true},
		filled("x", 1),
		filled("\x00\x1f\x7f\b\f\r é\u2028\u2029\xff\xc3 \U0001F600 </script>", -3),
	} {
		want, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendExecRequest(nil, req); !bytes.Equal(got, want) {
			t.Errorf("appendExecRequest:\n%s\nwant\n%s", got, want)
		}
	}
}

// Whatever the strings hold, the bytes are json.Marshal's.
func FuzzAppendExecRequest(f *testing.F) {
	f.Add("plain", int64(0))
	f.Add("\xff\xfe<\u2028\"\\\x01", int64(-1))
	f.Fuzz(func(t *testing.T, s string, n int64) {
		req := filled(s, n)
		want, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendExecRequest(nil, req); !bytes.Equal(got, want) {
			t.Fatalf("appendExecRequest:\n%q\nwant\n%q", got, want)
		}
	})
}
