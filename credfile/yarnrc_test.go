package credfile

import (
	"strings"
	"testing"
)

func TestYarnrcYML(t *testing.T) {
	in := `# CANARY0
nodeLinker: node-modules
npmRegistryServer: "https://registry.example"
npmAuthToken: CANARY1
npmAuthIdent: "user:CANARY2"
npmAlwaysAuth: true
npmScopes:
  corp:
    npmRegistryServer: https://npm.corp.example
    npmAuthToken: CANARY3
npmRegistries:
  "https://u:CANARY4@npm.other.example":
    npmAuthToken: CANARY5
  //npm.pkg.github.com:
    npmAuthToken: "${GITHUB_TOKEN-}"
httpProxy: http://bob:CANARY6@proxy:3128
enableTelemetry: false
`
	got := string(YarnrcYML([]byte(in)))
	if strings.Contains(got, "CANARY") || strings.Contains(got, "GITHUB_TOKEN") {
		t.Errorf("a credential was kept:\n%s", got)
	}
	for _, keep := range []string{"nodeLinker: node-modules", "enableTelemetry: false", "npmRegistryServer: https://npm.corp.example"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q lost:\n%s", keep, got)
		}
	}
	for _, bad := range []string{
		"a: &x CANARY\nnpmAuthToken: *x\n",
		"base: &b {npmAuthToken: CANARY}\nother:\n  <<: *b\n",
		"x: !!str CANARY\n",
		"- CANARY\n",
		"a: 1\n---\nnpmAuthToken: CANARY\n",
		"{",
	} {
		if out := string(YarnrcYML([]byte(bad))); out != "" {
			t.Errorf("%q -> %q, want nothing", bad, out)
		}
	}
}

func FuzzYarnrcYML(f *testing.F) {
	f.Add([]byte("nodeLinker: pnp\nnpmAuthToken: x\n"))
	f.Add([]byte("npmScopes:\n  a:\n    npmAuthIdent: y\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := YarnrcYML(data)
		if len(out) == 0 {
			return
		}
		if again := YarnrcYML(out); string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q", out, again)
		}
	})
}
