package policy

import (
	"slices"
	"testing"
)

func TestFilterEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"GOPATH=/home/u/go",
		"OPENAI_API_KEY=sk-1",
		"GITHUB_TOKEN=ghp_x",
		"SSH_AUTH_SOCK=/run/agent",
		"AWS_SECRET_ACCESS_KEY=x",
		"MY_PASSWORD=x",
		"SANDBOXD_POLICY=/x",
		"TERM=xterm",
		"NPM_TOKEN=1",
		"NPM_TOKEN=2",
		"NOEQUALS",
	}
	tests := []struct {
		name        string
		allow, deny []string
		kept        []string
		dropped     []string
	}{
		{
			name: "defaults",
			deny: DefaultEnvDeny(),
			kept: []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "GOPATH=/home/u/go", "TERM=xterm", "NOEQUALS"},
			dropped: []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MY_PASSWORD", "NPM_TOKEN",
				"OPENAI_API_KEY", "SANDBOXD_POLICY", "SSH_AUTH_SOCK"},
		},
		{
			name:  "allow overrides deny",
			allow: []string{"GITHUB_TOKEN", "SSH_*"},
			deny:  DefaultEnvDeny(),
			kept: []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "GOPATH=/home/u/go",
				"GITHUB_TOKEN=ghp_x", "SSH_AUTH_SOCK=/run/agent", "TERM=xterm", "NOEQUALS"},
			dropped: []string{"AWS_SECRET_ACCESS_KEY", "MY_PASSWORD", "NPM_TOKEN", "OPENAI_API_KEY", "SANDBOXD_POLICY"},
		},
		{
			name:    "extra deny",
			deny:    []string{"TERM", "NOEQUALS", "*ANG"},
			kept:    []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "GOPATH=/home/u/go", "OPENAI_API_KEY=sk-1", "GITHUB_TOKEN=ghp_x", "SSH_AUTH_SOCK=/run/agent", "AWS_SECRET_ACCESS_KEY=x", "MY_PASSWORD=x", "SANDBOXD_POLICY=/x", "NPM_TOKEN=1", "NPM_TOKEN=2"},
			dropped: []string{"LANG", "NOEQUALS", "TERM"},
		},
		{
			name: "nothing denied",
			kept: environ,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := FilterEnv(environ, tt.allow, tt.deny)
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("kept\n got %q\nwant %q", kept, tt.kept)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped\n got %q\nwant %q", dropped, tt.dropped)
			}
		})
	}
}

func TestMatchEnvPattern(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"PATH", "PATH", true},
		{"PATH", "PATHX", false},
		{"PATH", "path", false},
		{"FOO_*", "FOO_BAR", true},
		{"FOO_*", "FOO_", true},
		{"FOO_*", "FOO", false},
		{"*_TOKEN", "GITHUB_TOKEN", true},
		{"*_TOKEN", "TOKEN", false},
		{"*TOKEN", "TOKEN", true},
		{"*_TOKEN_*", "CI_TOKEN_FILE", true},
		{"*SECRET*", "SECRET", true},
		{"*SECRET*", "MY_SECRET_THING", true},
		{"*SECRET*", "SECRE", false},
		{"*API_KEY*", "OPENAI_API_KEY", true},
		{"*_KEY", "GOPATH", false},
		{"A*B*C", "AXXBYYC", true},
		{"A*B*C", "AXXBYY", false},
		{"*", "", true},
		{"", "", true},
		{"**", "X", true},
		{"A?", "AB", false}, // only '*' is special
		{"A?", "A?", true},
	}
	for _, tt := range tests {
		if got := MatchEnvPattern(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchEnvPattern(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
	// None of the built-in deny patterns may hit everyday variables.
	for _, name := range []string{"PATH", "HOME", "LANG", "GOPATH", "TERM", "USER", "SHELL", "PWD", "EDITOR", "LC_ALL", "TZ", "GOFLAGS", "CARGO_HOME", "KEYTIMEOUT"} {
		if matchAny(DefaultEnvDeny(), name) {
			t.Errorf("built-in deny list strips %s", name)
		}
	}
}

func TestCredentialValue(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"postgres://app:hunter2@db.internal:5432/app", true},
		{"redis://:hunter2@cache:6379/0", true},
		{"mysql://u:p@tcp(db:3306)/app", true},
		{"https://__token__:pypi-AgEIcHlwaS5vcmc@upload.pypi.org/legacy/", true},
		{"https://ghp_0123456789abcdefABCDEF0123456789abcd@github.com/org/repo.git", true},
		{"http://a.example,https://u:pw@b.example", true}, // any URL of a list
		{"alice:hunter2@proxy.corp:3128", true},
		{"ru:pw@rsync-proxy/", true},
		{"host=db user=app password=hunter2", true},
		{"Driver={PostgreSQL};Server=db;Uid=app;Pwd=hunter2;", true},
		{"jdbc:mysql://db:3306/app?user=app&password=hunter2", true},
		{"host=db password = 'hunter2'", true},
		// From a red team (helper-70): passwords with '/', '@' or '#',
		// Go's MySQL DSN, IPv6 proxies, JVM and Spring settings, JSON,
		// Azure's connection strings, OTLP headers, percent-encoding.
		{"postgresql://u:pa/ss@host/db", true},
		{"postgresql://u:pa#ss@host/db", true},
		{"user:p@ss@proxy.corp:3128", true},
		{"proxyuser:proxypass@[::1]:3128", true},
		{"root:secret@tcp(localhost:3306)/app?parseTime=true", true},
		{"root:secret@unix(/tmp/mysql.sock)/app", true},
		{"-Dhttp.proxyPassword=s3cret -Xmx2g", true},
		{"-Dspring.datasource.password=s3cret", true},
		{"sslpassword=s3cret", true},
		{`{"username":"u","password":"p"}`, true},
		{"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;EndpointSuffix=core.windows.net", true},
		{"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=abc=", true},
		{"Authorization=Basic dXNlcjpwYXNz", true},
		{"mssql+pyodbc:///?odbc_connect=DRIVER%3D%7BODBC%7D%3BUID%3Du%3BPWD%3Dsecret", true},
		{"https://user:pass%40word@host", true},
		{"HTTPS://USER:PASS@HOST", true},
		// No credentials: kept.
		{"postgres://db.internal:5432/app", false},
		{"postgres://app@db.internal/app", false}, // a user alone, short
		{"redis://:@cache:6379", false},           // an empty password
		{"ssh://git@github.com/org/repo.git", false},
		{"https://proxy.golang.org,direct", false},
		{"user@example.com", false},
		{"git@github.com:org/repo.git", false},
		{"nginx:1.25@sha256:0123abcd", false},
		{`\u@\h:\w\$ `, false},
		{`\u@\h:\w\$`, false},
		{"/usr/local/bin:/usr/bin:/bin", false},
		{"di=01;34:ln=01;36:*.tar=01;31:", false},
		{":0", false},
		{"", false},
		{"a:b@", false},
		{"a:b@c:", false},
		{"://u:p@h", false}, // no scheme
		{"host=db user=app password=", false},
		{"password_reset_url=/reset", false},
		{"--show-password=false", false},
		{"mypwd=1", false},
		// Kept, from the same red team: users that are no secret, URIs
		// without "//", the JDK's default key store password.
		{"ssh://APKAEIBAERJR2EXAMPLE@git-codecommit.us-east-2.amazonaws.com/v1/repos/MyDemoRepo", false},
		{"ssh://first.last@company.com@source.developers.google.com:2022/p/proj/r/repo", false},
		{"ssh://deploy_user_for_production@host", false},
		{"https://contoso-engineering-team@dev.azure.com/contoso-engineering-team/project/_git/repo", false},
		{"mailto:admin@example.com", false},
		{"sip:alice@example.com", false},
		{"-Djavax.net.ssl.trustStore=/etc/pki/java/cacerts -Djavax.net.ssl.trustStorePassword=changeit", false},
		{"https://example.com:8080/path?email=a@b.c", false},
		{"org/repo/.github/workflows/ci.yml@refs/heads/main", false},
		{"ssh://core@127.0.0.1:56789/run/user/1000/podman/podman.sock", false},
		{"localhost,127.0.0.1,::1,.internal,169.254.169.254", false},
		{"proxyuser:proxypass@[::1", false},
	} {
		if got := CredentialValue(tc.v); got != tc.want {
			t.Errorf("CredentialValue(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestFilterEnvCredentialValues: a value with credentials goes whatever
// its name, and an allow pattern passes it, as it passes a denied name.
func TestFilterEnvCredentialValues(t *testing.T) {
	environ := []string{"DATABASE_URL=postgres://app:hunter2@db/app", "FTP_PROXY=u:pw@proxy:21", "PLAIN_URL=postgres://db/app", "PATH=/bin"}
	kept, dropped := FilterEnv(environ, nil, DefaultEnvDeny())
	if want := []string{"PLAIN_URL=postgres://db/app", "PATH=/bin"}; !slices.Equal(kept, want) {
		t.Errorf("kept %q, want %q", kept, want)
	}
	if want := []string{"DATABASE_URL", "FTP_PROXY"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %q, want %q", dropped, want)
	}
	kept, _ = FilterEnv(environ, []string{"DATABASE_URL"}, DefaultEnvDeny())
	if !slices.Contains(kept, "DATABASE_URL=postgres://app:hunter2@db/app") || slices.Contains(kept, "FTP_PROXY=u:pw@proxy:21") {
		t.Errorf("allow DATABASE_URL: kept %q", kept)
	}
}

func FuzzCredentialValue(f *testing.F) {
	for _, s := range []string{"postgres://u:p@h/db", "u:p@h:1", "https://x@y", "://@:", "a://b:c@d@e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		CredentialValue(v) // no panic, linear time
	})
}
