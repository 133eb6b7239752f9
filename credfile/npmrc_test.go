package credfile

import (
	"strings"
	"testing"
)

func TestNpmrc(t *testing.T) {
	in := `# my token: npm_OLDTOKEN1234
fund=false
audit = false
registry=https://registry.npmjs.org/
//registry.npmjs.org/:_authToken=npm_SECRET1
//npm.pkg.github.com/:_authToken=${GITHUB_TOKEN}
@corp:registry=https://npm.corp.example/
//npm.corp.example/:_auth=dXNlcjpwYXNz
//npm.corp.example/:username=alice
//npm.corp.example/:_password=cGFzcw==
//npm.corp.example/:email=alice@example.org
//npm.corp.example/:certfile=/home/a/.certs/client.crt
//npm.corp.example/:keyfile=/home/a/.certs/client.key
_authToken=npm_SECRET2
_AUTH=SECRET3
always-auth=true
proxy=http://bob:hunter2@proxy.example:3128
https-proxy=http://proxy.example:3128
; another comment SECRET4
not a setting SECRET5
save-exact=true
`
	got := string(Npmrc([]byte(in)))
	for _, secret := range []string{"OLDTOKEN", "SECRET", "GITHUB_TOKEN", "dXNlcjpwYXNz", "alice", "cGFzcw", "client.crt", "client.key", "hunter2", "always-auth"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q kept:\n%s", secret, got)
		}
	}
	want := "fund=false\naudit=false\nregistry=https://registry.npmjs.org/\n@corp:registry=https://npm.corp.example/\nhttps-proxy=http://proxy.example:3128\nsave-exact=true\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Spellings npm's ini reader turns into a credential key.
func TestNpmrcSpellings(t *testing.T) {
	for _, in := range []string{
		"registry=https://r/\r//registry.npmjs.org/:_authToken=CANARY",
		"\"//registry.npmjs.org/:_\\u0061uth\\u0054oken\"=CANARY",
		"'//registry.npmjs.org/:_authToken'=CANARY",
		"//registry.npmjs.org/:${KEY}=CANARY",
		"//registry.npmjs.org/:_auth\\Token=CANARY",
		"registry=https://r/?_authToken=CANARY",
		"\ufeff_authToken=CANARY",
		"//r/:_ａuthToken=CANARY",
		"_authToken\t=\tCANARY",
		"//r/:_authToken = CANARY\r\n",
	} {
		if out := string(Npmrc([]byte(in + "\nfund=false\n"))); strings.Contains(out, "CANARY") || !strings.Contains(out, "fund=false") {
			t.Errorf("%q -> %q", in, out)
		}
	}
}

func FuzzNpmrc(f *testing.F) {
	f.Add([]byte("fund=false\n//r/:_authToken=x\n"))
	f.Add([]byte("proxy=http://u:p@h\n_auth=z\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := Npmrc(data)
		// Idempotent, and nothing kept names a credential.
		if again := Npmrc(out); string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q", out, again)
		}
		for _, line := range strings.Split(string(out), "\n") {
			key, value, _ := strings.Cut(line, "=")
			if line != "" && (npmSecret(key) || !plainKey.MatchString(key) || secretValue(value)) {
				t.Fatalf("kept %q", line)
			}
		}
	})
}
