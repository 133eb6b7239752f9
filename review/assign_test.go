package review

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// Values assigned to secret-looking names are hidden whatever they look
// like, in every syntax a command, a script, an .env file or a config
// assigns them; the name stays.
func TestRedactAssignedValues(t *testing.T) {
	r := NewRedactor(nil)
	const m = "[REDACTED:named-secret]"
	tests := []struct{ in, want string }{
		// Shell and .env.
		{"DB_PASSWORD=hunter2 ./deploy.sh", "DB_PASSWORD=" + m + " ./deploy.sh"},
		{"export STRIPE_SECRET=sk_live_x", "export STRIPE_SECRET=" + m},
		{"PGPASSWORD=pw psql -h db -U app", "PGPASSWORD=" + m + " psql -h db -U app"},
		{"MYSQL_PWD=a mysql -u root", "MYSQL_PWD=" + m + " mysql -u root"},
		{`API_KEY="my api key" make`, `API_KEY="` + m + `" make`},
		{`API_KEY='my api key'; make`, `API_KEY='` + m + `'; make`},
		{`TOKEN=$'a\tb' run`, `TOKEN=$'` + m + `' run`},
		{`SECRET=ab"c d"e run`, `SECRET=` + m + ` run`},
		{"declare -x AUTH_TOKEN=t0k; local db_pass=p", "declare -x AUTH_TOKEN=" + m + "; local db_pass=" + m},
		{"DB_PASSWORD=\nNEXT=1", "DB_PASSWORD=\nNEXT=1"},
		// An unquoted value is one shell word: what follows is the
		// command it is set for (see assign.go).
		{"# .env\nDB_HOST=db\nDB_PASSWORD=correct horse\nSTRIPE_SECRET_KEY=sk\n",
			"# .env\nDB_HOST=db\nDB_PASSWORD=" + m + " horse\nSTRIPE_SECRET_KEY=" + m + "\n"},
		{"${DB_PASSWORD:-hunter2}", "${DB_PASSWORD:-" + m + "}"},
		{"echo \"DB_PASSWORD=abc\"; curl https://evil.example/", "echo \"DB_PASSWORD=" + m + "\"; curl https://evil.example/"},
		// Configs: YAML, JSON, INI, properties, code.
		{"password: correct horse battery staple\nuser: bob", "password: " + m + "\nuser: bob"},
		{"db:\n  password: hunter2 # rotate\n  port: 5432", "db:\n  password: " + m + " # rotate\n  port: 5432"},
		{"private_key: |\n  line one\n  line two\nnext: 1", "private_key: |\n" + m + "\nnext: 1"},
		{`{"password": "x y", "user": "bob"}`, `{"password": "` + m + `", "user": "bob"}`},
		{`{"apiKey":"k","n":1}`, `{"apiKey":"` + m + `","n":1}`},
		{`curl -d "{\"token\":\"abc\",\"n\":1}" https://x`, `curl -d "{\"token\":\"` + m + `\",\"n\":1}" https://x`},
		{"password = 'x'", "password = '" + m + "'"},
		{"[client]\npassword = p@ss w0rd\n", "[client]\npassword = " + m + "\n"},
		{"spring.datasource.password=hunter2", "spring.datasource.password=" + m},
		{`const apiToken = "abc";`, `const apiToken = "` + m + `";`},
		{"PASSWORD := s3cr3t", "PASSWORD := " + m},
		{":password => 'x', 'token' => 'y'", ":password => '" + m + "', 'token' => '" + m + "'"},
		{"echo \"password: abc\"; curl https://evil.example/", "echo \"password: " + m + "\"; curl https://evil.example/"},
		// Flags.
		{"mysql --password=hunter2 -u root", "mysql --password=" + m + " -u root"},
		{"app --db-password hunter2 --port 80", "app --db-password " + m + " --port 80"},
		{"app -token 'a b' -v", "app -token '" + m + "' -v"},
		{"openssl enc -pass pass:hunter2 -in f", "openssl enc -pass " + m + " -in f"},
		{"curl -u alice:hunter2 https://x", "curl -u alice:" + m + " https://x"},
		{"curl --user=alice:hunter2 https://x", "curl --user=alice:" + m + " https://x"},
		// Connection strings: the user:password part. A DSN's is credentials
		// before a host without a scheme, the shape reBareUserinfo names
		// wherever it stands (the same span, under that kind's name).
		{"DSN=user:pw@tcp(db:3306)/app", "DSN=[REDACTED:url-userinfo]@tcp(db:3306)/app"},
		{`PGDSN="host=db user=app password=hunter2"`, `PGDSN="host=db user=app password=` + m + `"`},
		{"DATABASE_URL=postgres://u:pw@db/app", "DATABASE_URL=postgres://[REDACTED:url-userinfo]@db/app"},
	}
	for _, tc := range tests {
		got := r.Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if again := r.Redact(got); again != got {
			t.Errorf("not idempotent: %q then %q", got, again)
		}
	}
}

// What is not a secret's value stays: references to other variables,
// what a name says about a secret rather than the secret, counts, the
// working directory, lookup keys, flags that take no secret.
func TestRedactAssignedKeeps(t *testing.T) {
	r := NewRedactor(nil)
	for _, in := range []string{
		"MAX_TOKENS=512 python generate.py",
		"max_tokens: 4096",
		"TOKENIZER_PATH=/models/tok.json KEYBOARD=us XKB_KEYMAP=gb",
		"PWD=/home/u/ws OLDPWD=/home/u cd -",
		"PASSWORD=$DB_PASS TOKEN=${T} SECRET=\"$S\" X=$(cat /run/s)",
		"password: ${DB_PASSWORD}\ntoken: ${{ secrets.GITHUB_TOKEN }}",
		"PASSWORD_FILE=/run/secrets/db TOKEN_URL=https://auth.example/token SECRET_NAME=db-creds",
		"AWS_ACCESS_KEY_ID_FILE=/x PASSWORD_MIN_LENGTH=12 TOKEN_TTL=3600 auth_type: oauth",
		"GIT_CREDENTIAL_HELPER=store credential.helper=store",
		"PUBLIC_KEY=abc SORT_KEY=name PRIMARY_KEY=id key: value",
		"secrets: inherit",
		"docker login --password-stdin registry.example.com",
		"docker run -u 1000:1000 img; curl -u alice https://x",
		"if [ \"$PASSWORD\" == \"x\" ]; then :; fi",
		"GITHUB_TOKENS_DIR=/t NUM_TOKENS=3 tokens: 12",
		"author: Alice\nauthority: ca.example",
		"kubectl create secret generic db --from-literal=user=app",
	} {
		if got := r.Redact(in); got != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, got)
		}
	}
	// A single-quoted "$x" is literal text, not a reference.
	if got := r.Redact("PASSWORD='$ecret'"); got != "PASSWORD='[REDACTED:named-secret]'" {
		t.Errorf("single-quoted dollar: %q", got)
	}
}

func TestSecretName(t *testing.T) {
	tests := []struct {
		name        string
		flag        bool
		secret, dsn bool
	}{
		{"DB_PASSWORD", false, true, false}, {"PGPASSWORD", false, true, false}, {"MYSQL_PWD", false, true, false},
		{"PWD", false, false, false}, {"OLDPWD", false, false, false}, {"pwd", true, false, false},
		{"STRIPE_SECRET", false, true, false}, {"clientSecret", false, true, false}, {"SECRET_KEY_BASE", false, true, false},
		{"GITHUB_TOKEN", false, true, false}, {"accessToken", false, true, false}, {"TOKENIZER_PATH", false, false, false},
		{"MAX_TOKENS", false, false, false}, {"max_token", false, false, false}, {"KEYBOARD", false, false, false},
		{"API_KEY", false, true, false}, {"APIKey", false, true, false}, {"apikey", false, true, false},
		{"PRIVATE_KEY", false, true, false}, {"private_key_path", false, false, false}, {"PUBLIC_KEY", false, false, false},
		{"KEY", false, false, false}, {"key_vault", false, false, false}, {"SSH_KEY", false, true, false},
		{"AWS_ACCESS_KEY_ID", false, false, false}, {"AWS_SECRET_ACCESS_KEY", false, true, false},
		{"BASIC_AUTH", false, true, false}, {"_auth", false, true, false}, {"AUTH_URL", false, false, false},
		{"AUTHOR", false, false, false}, {"DB_PASS", false, true, false}, {"pass", false, false, false},
		{"pass", true, true, false}, {"passin", true, true, false}, {"password-stdin", true, false, false},
		{"GOOGLE_APPLICATION_CREDENTIALS", false, true, false}, {"credential.helper", false, false, false},
		{"SESSION_COOKIE", false, true, false}, {"DSN", false, false, true}, {"SENTRY_DSN", false, false, true},
		{"ConnectionString", false, false, true}, {"DB_CONN_STR", false, false, true}, {"", false, false, false},
	}
	for _, tc := range tests {
		secret, dsn := secretName(tc.name, tc.flag)
		if secret != tc.secret || dsn != tc.dsn {
			t.Errorf("secretName(%q, flag %v) = %v, %v; want %v, %v", tc.name, tc.flag, secret, dsn, tc.secret, tc.dsn)
		}
	}
}

// assignForms are the syntaxes FuzzRedactAssigned writes, each with the
// bytes a value in it may not hold (so that the syntax keeps it whole).
func assignForms() []struct{ format, banned string } {
	word := " \t\r\n;|&<>()`\"'\\$#"
	line := word + "|>"
	return []struct{ format, banned string }{
		{"%s=%s", word},
		{"export %s=%s", word},
		{`%s="%s"`, "\"\\$`\n\r"},
		{"%s='%s'", "'\n\r"},
		{"%s: %s", line},
		{`"%s": "%s",`, "\"\\\n\r"},
		{"--%s=%s", word},
		{"--%s %s", word},
		{"%s = %s", line},
		{"${%s:-%s}", "}\n\r"},
		{"%s := %s", line},
	}
}

// FuzzRedactAssigned: a value assigned to a secret-looking name, in any
// of the syntaxes, on a line between any texts, never survives
// redaction, and the result is valid and settled.
func FuzzRedactAssigned(f *testing.F) {
	f.Add("echo hi", "curl https://x", "hunter2", uint8(0), uint8(0))
	f.Add("password: |", "", "correct horse", uint8(2), uint8(4))
	f.Add("-----BEGIN "+"PRIVATE KEY-----", "x", "a b c", uint8(3), uint8(3))
	f.Add("${", "}", "v", uint8(9), uint8(5))
	f.Add("\"", "'", "p@ss:w0rd", uint8(5), uint8(7))
	names := []string{"DB_PASSWORD", "STRIPE_SECRET", "PGPASSWORD", "api_key", "githubToken", "MYSQL_PWD", "client-secret", "spring.datasource.password"}
	forms := assignForms()
	r := NewRedactor(nil)
	f.Fuzz(func(t *testing.T, before, after, value string, name, form uint8) {
		fm := forms[int(form)%len(forms)]
		v := strings.Map(func(c rune) rune {
			if c >= utf8.RuneSelf || strings.ContainsRune(fm.banned, c) || c < ' ' {
				return -1
			}
			return c
		}, value)
		v = strings.TrimSpace(v)
		// A distinctive value: no name or marker holds it.
		v = "Zq9" + v
		assigned := fmt.Sprintf(fm.format, names[int(name)%len(names)], v)
		in := before + "\n" + assigned + "\n" + after
		out := r.Redact(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Redact(%q) = %q: invalid UTF-8", in, out)
		}
		if again := r.Redact(out); again != out {
			t.Fatalf("not idempotent: Redact(%q) = %q, then %q", in, out, again)
		}
		if strings.Count(out, v) > strings.Count(before, v)+strings.Count(after, v) {
			t.Fatalf("Redact(%q) = %q: the value %q survived", in, out, v)
		}
	})
}
